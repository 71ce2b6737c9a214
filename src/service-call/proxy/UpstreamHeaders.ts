/**
 * A proxy's static upstream headers (`handler.headers`): their values are write-only. The admin API
 * seals each value as it is written (AES-256-GCM, `enc:v1:...`, the service uuid and the header
 * name bound as additional data so a sealed value cannot be moved to another service or header)
 * with a key derived from the credential digest key (`ClientSecrets.headerSealingKey`), which is
 * itself sealed at rest with KEY_ENCRYPTION_KEY when set. So values are never stored, exported or
 * logged in clear, whichever storage; only the gateway opens them, once per stored handler.
 *
 * What an operator sends replaces the stored set (an object), keeps some of it (an array of names,
 * as GET answers them) or, absent, keeps it all (`mergeHeaders`).
 */
import { Either } from "effect"
import { InvalidRequest } from "../../domain/Errors.js"
import type { ServiceHandlerInput, StoredHandler } from "../../domain/Handlers.js"
import { isSealed, open, seal } from "../../keys/KeyEncryption.js"

/** What a value is sealed under: its service and its header (case-insensitive). */
const sealedName = (serviceUuid: string, header: string) => `upstream_header:${serviceUuid}:${header.toLowerCase()}`

export const sealHeaderValue = (key: Buffer, serviceUuid: string, header: string, value: string) =>
  seal(key, sealedName(serviceUuid, header), value)

/** The value in clear, or undefined when this key does not open it (another database's digest key). */
export const openHeaderValue = (key: Buffer, serviceUuid: string, header: string, stored: string): string | undefined =>
  isSealed(stored) ? open(key, sealedName(serviceUuid, header), stored) : undefined

/** Every value of a stored handler in clear, or the name of the first that cannot be opened. */
export const openHeaders = (
  key: Buffer,
  serviceUuid: string,
  headers: Readonly<Record<string, string>>
): Either.Either<Record<string, string>, string> => {
  const clear: Record<string, string> = {}
  for (const [name, stored] of Object.entries(headers)) {
    const value = openHeaderValue(key, serviceUuid, name, stored)
    if (value === undefined) return Either.left(name)
    clear[name] = value
  }
  return Either.right(clear)
}

/**
 * The handler to store for what an operator sent, given what is stored now: values sealed; a value
 * sent again unchanged keeps its stored form (so writing the same service twice changes nothing).
 */
export const storedHandlerOf = (
  key: Buffer,
  serviceUuid: string,
  input: ServiceHandlerInput,
  current: StoredHandler | undefined
): Either.Either<StoredHandler, InvalidRequest> => {
  if (input.type !== "proxy") return Either.right(input)
  const { headers, ...rest } = input
  const stored = current?.type === "proxy" ? current.headers ?? {} : {}
  const storedByName = new Map(Object.entries(stored).map(([name, value]) => [name.toLowerCase(), { name, value }]))
  if (headers === undefined) {
    return Either.right(Object.keys(stored).length === 0 ? rest : { ...rest, headers: stored })
  }
  const next: Record<string, string> = {}
  if (Array.isArray(headers)) {
    for (const name of headers as ReadonlyArray<string>) {
      const kept = storedByName.get(name.toLowerCase())
      if (kept === undefined) {
        return Either.left(
          new InvalidRequest({
            description: `handler.headers: ${name} has no stored value to keep; send headers as an object of names and values`
          })
        )
      }
      next[kept.name] = kept.value
    }
  } else {
    for (const [name, value] of Object.entries(headers as Readonly<Record<string, string>>)) {
      const previous = storedByName.get(name.toLowerCase())
      const same = previous !== undefined && previous.name === name &&
        openHeaderValue(key, serviceUuid, name, previous.value) === value
      next[name] = same ? previous.value : sealHeaderValue(key, serviceUuid, name, value)
    }
  }
  return Either.right(Object.keys(next).length === 0 ? rest : { ...rest, headers: next })
}
