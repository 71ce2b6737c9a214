/**
 * What the row schemas cannot see: keys unique, parents present, the credential limit, the digest
 * key (`inconsistency`, synchronous, part of the document's schema), and the signing keys imported
 * as a server would load them (`checkKeys`).
 */
import { Effect, Either } from "effect"
import * as Jose from "jose"
import { DIGEST_KEY_NAME } from "../catalogue/ClientSecrets.js"
import { isSealed } from "../keys/KeyEncryption.js"
import { importSigningKey, SIGNING_KEY_NAME } from "../keys/SigningKeyMaterial.js"
import { MAX_CREDENTIALS } from "../domain/Limits.js"
import { type ExportedTables, SEALED_PATTERN, serviceKey } from "./ExportRows.js"
import { InvalidExportFile } from "./TransferErrors.js"

/** What the schema of each row cannot see: keys unique, parents present, the credential limit, the digest key. */
export const inconsistency = (tables: ExportedTables): string | undefined => {
  const duplicate = <A>(rows: ReadonlyArray<A>, key: (row: A) => string) => {
    const seen = new Set<string>()
    for (const row of rows) {
      if (seen.has(key(row))) return key(row)
      seen.add(key(row))
    }
    return undefined
  }
  const duplicates = [
    ["profile", duplicate(tables.profiles, (r) => r.profile)],
    ["environment", duplicate(tables.environments, (r) => `${r.profile}/${r.name}`)],
    ["service", duplicate(tables.services, (r) => serviceKey(r.profile, r.environment, r.uuid))],
    ["credential", duplicate(tables.credentials, (r) => r.client_id)],
    ["server key", duplicate(tables.server_keys, (r) => r.name)],
    ["signing key", duplicate(tables.signing_keys, (r) => r.kid)],
    ["trusted issuer", duplicate(tables.trusted_issuers, (r) => r.name)]
  ] as const
  for (const [what, key] of duplicates) if (key !== undefined) return `${what} ${key} is listed twice`

  const profiles = new Set(tables.profiles.map((r) => r.profile))
  const environments = new Set(tables.environments.map((r) => `${r.profile}/${r.name}`))
  const services = new Set(tables.services.map((r) => serviceKey(r.profile, r.environment, r.uuid)))
  for (const r of tables.environments) {
    if (!profiles.has(r.profile)) return `environment ${r.profile}/${r.name}: its profile is not in the file`
  }
  for (const r of tables.services) {
    if (!environments.has(`${r.profile}/${r.environment}`)) {
      return `service ${serviceKey(r.profile, r.environment, r.uuid)}: its environment is not in the file`
    }
  }
  const live = new Map<string, number>()
  for (const r of tables.credentials) {
    if (r.deleted_at !== null) continue // a tombstone outlives its service, by design
    const key = serviceKey(r.profile, r.environment, r.service_uuid)
    if (!services.has(key)) return `credential ${r.client_id}: its service ${key} is not in the file`
    live.set(key, (live.get(key) ?? 0) + 1)
    if (live.get(key)! > MAX_CREDENTIALS) return `service ${key} has more than ${MAX_CREDENTIALS} live credentials`
  }
  if (tables.credentials.length > 0 && !tables.server_keys.some((k) => k.name === DIGEST_KEY_NAME)) {
    return `the credentials come without the ${DIGEST_KEY_NAME} their digests were made with`
  }
  // Either key may be sealed with KEY_ENCRYPTION_KEY (then only its form can be checked here).
  const digestKey = tables.server_keys.find((k) => k.name === DIGEST_KEY_NAME)
  if (digestKey !== undefined && !/^[A-Za-z0-9_-]{43,}$/.test(digestKey.value) && !SEALED_PATTERN.test(digestKey.value)) {
    return `server key ${DIGEST_KEY_NAME} is neither a base64url key of at least 256 bits nor a sealed value`
  }
  const signingKey = tables.server_keys.find((k) => k.name === SIGNING_KEY_NAME)
  if (signingKey !== undefined && !signingKey.value.includes("-----BEGIN") && !SEALED_PATTERN.test(signingKey.value)) {
    return `server key ${SIGNING_KEY_NAME} is neither a PEM private key nor a sealed value`
  }
  return undefined
}

const reason = (error: unknown) => (error instanceof Error ? error.message : "unreadable")

/**
 * What the schema cannot check synchronously, as the server will load the keys: each signing key's
 * kid is the RFC 7638 thumbprint of its public key (the server ignores a row where it is not), and
 * a private key in PEM imports and is that public key's private half; the legacy signing key in PEM
 * imports. A sealed private key can only be opened by a server with its KEY_ENCRYPTION_KEY.
 */
export const checkKeys = (tables: ExportedTables): Effect.Effect<void, InvalidExportFile> =>
  Effect.gen(function*() {
    const invalid = (message: string) => Effect.fail(new InvalidExportFile({ message }))
    for (const [index, key] of tables.signing_keys.entries()) {
      const where = `tables.signing_keys[${index}]`
      const thumbprint = yield* Effect.promise(() => Jose.calculateJwkThumbprint(key.public_jwk).catch(() => undefined))
      if (thumbprint !== key.kid) return yield* invalid(`${where}: kid is not the RFC 7638 thumbprint of public_jwk`)
      if (isSealed(key.private_key)) continue
      const imported = yield* Effect.either(Effect.tryPromise(() => importSigningKey(key.private_key)))
      if (Either.isLeft(imported)) {
        return yield* invalid(`${where}: private_key is not usable (${reason(imported.left.error)})`)
      }
      if (imported.right.kid !== key.kid) return yield* invalid(`${where}: private_key is not the private half of public_jwk`)
    }
    for (const key of tables.server_keys) {
      if (key.name !== SIGNING_KEY_NAME || isSealed(key.value)) continue
      const imported = yield* Effect.either(Effect.tryPromise(() => importSigningKey(key.value)))
      if (Either.isLeft(imported)) {
        return yield* invalid(`the file's signing key is not usable (${reason(imported.left.error)})`)
      }
    }
  })
