/**
 * The rules of a profile save, as one pure function both repositories call after they have
 * locked and read the services a save touches: every service must exist, every removal must name
 * a live credential of its service, and no service may end with more than two live credentials.
 */
import { Either } from "effect"
import { CredentialLimitExceeded, NotFound } from "../domain/Errors.js"
import type { EnvironmentName, ServiceUuid } from "../domain/Identifiers.js"
import { type CredentialChange, MAX_CREDENTIALS_PER_SERVICE } from "./CredentialRepo.js"

/** A touched service as read under lock: its live client ids, or undefined when it does not exist. */
export type ServiceSnapshot = ReadonlyMap<string, ReadonlyArray<string> | undefined>

export const serviceKey = (environment: EnvironmentName, uuid: ServiceUuid): string => `${environment}\u0000${uuid}`

export const checkCredentialChanges = (
  snapshot: ServiceSnapshot,
  changes: ReadonlyArray<CredentialChange>
): Either.Either<void, NotFound | CredentialLimitExceeded> => {
  const live = new Map<string, Set<string>>()
  for (const change of changes) {
    const key = serviceKey(change.environment, change.serviceUuid)
    const existing = snapshot.get(key)
    if (existing === undefined) {
      return Either.left(
        new NotFound({
          description: `Service ${change.serviceUuid} not found in environment ${change.environment}`
        })
      )
    }
    if (!live.has(key)) live.set(key, new Set(existing))
  }
  for (const change of changes) {
    if (change._tag !== "Remove") continue
    const ids = live.get(serviceKey(change.environment, change.serviceUuid))!
    if (!ids.delete(change.clientId)) {
      return Either.left(
        new NotFound({ description: `Credential ${change.clientId} is not a live credential of service ${change.serviceUuid}` })
      )
    }
  }
  for (const change of changes) {
    if (change._tag !== "Add") continue
    const ids = live.get(serviceKey(change.environment, change.serviceUuid))!
    ids.add(change.clientId)
    if (ids.size > MAX_CREDENTIALS_PER_SERVICE) {
      return Either.left(
        new CredentialLimitExceeded({
          description:
            `Service ${change.serviceUuid} would hold more than ${MAX_CREDENTIALS_PER_SERVICE} credentials; remove one first`
        })
      )
    }
  }
  return Either.right(undefined)
}
