/**
 * The rows of an export file, table by table, as stored: timestamps as text to the microsecond, key
 * material checked for its form and never repeated in a message. Every exported table is here; the
 * tables left out are declared in `DatabaseSchema.ts`.
 */
import { TrustedIssuerName, verifierIdentity } from "../domain/FederatedCredential.js"
import { isKeyVerifier, parsePublicJwk, publicJwkMembers, RSA_PUBLIC_EXPONENT, verifierKey } from "../domain/KeyCredential.js"
import { parseRfc3339 } from "../domain/Time.js"
import { Schema } from "effect"
import { AuditAction, AuditDetails } from "../domain/AuditEvents.js"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { AuthType } from "../domain/Models.js"
import { StoredHandler } from "../domain/Handlers.js"
import { CredentialMaxLifetimeDays, RateLimit } from "../domain/Policies.js"
import { StorableText } from "../domain/Text.js"
import { issuerUrlProblem, TrustedIssuerSettings } from "../domain/TrustedIssuers.js"
import { UpstreamOrigin } from "../domain/UpstreamPolicy.js"

const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$/

/**
 * A `timestamptz` as stored: kept as text to the microsecond (a `Date` would drop the last three
 * digits, and a merge compares timestamps exactly). A time the API would refuse (`parseRfc3339`: a
 * date that does not exist, a year beyond 9999) is refused here too.
 */
export const StoredTimestamp = Schema.String.pipe(
  Schema.filter((value) => TIMESTAMP_PATTERN.test(value) && parseRfc3339(value) !== undefined, {
    message: () => "must be an ISO 8601 date-time with its offset, e.g. 2026-01-01T12:00:00.000000Z"
  })
)

/** A key verifier's JSON, when it is an object with a key type: a key, whether or not the API would accept it now. */
const isKeyForm = (verifier: string): boolean => {
  if (!isKeyVerifier(verifier)) return false
  try {
    const jwk: unknown = JSON.parse(verifier.slice("jwk:".length))
    return typeof jwk === "object" && jwk !== null && typeof (jwk as { kty?: unknown }).kty === "string"
  } catch {
    return false
  }
}

/**
 * A credential's verifier: a secret's HMAC-SHA256 digest, or a key credential's public key
 * (`KeyCredential`). A deleted credential's key is only kept so that its client id is never reused:
 * any key form travels then; a live credential's must be one the API accepts (`CredentialRow`).
 */
const SecretDigest = Schema.String.pipe(
  Schema.filter((value) => /^[0-9a-f]{64}$/.test(value) || isKeyForm(value) || verifierIdentity(value) !== undefined, {
    message: () => "must be an HMAC-SHA256 digest (64 hexadecimal digits), jwk: and a public JWK, or fed: and a federated identity"
  })
)

/** Why a live credential's key is refused (`publicJwkMembers`' words), or undefined when it is accepted. */
const liveKeyProblem = (verifier: string): string | undefined => {
  if (!isKeyVerifier(verifier) || verifierKey(verifier) !== undefined) return undefined
  try {
    const members = publicJwkMembers(JSON.parse(verifier.slice("jwk:".length)))
    return members._tag === "Left" ? members.left : "public_key is not a valid public key"
  } catch {
    return "public_key is not a valid public key"
  }
}

/** Key material: whatever is wrong with it, the message never repeats it. */
const KeyValue = Schema.String.annotations({ message: () => "must be a string" }).pipe(
  Schema.filter((value) => value.length > 0, { message: () => "must not be empty" })
)

/** A column added in version 3: read as its default from an older file. */
const addedInVersion3 = <S extends Schema.Schema.Any>(column: S, value: () => Schema.Schema.Type<S>) =>
  Schema.optionalWith(column, { default: value })

export const ProfileRow = Schema.Struct({
  profile: ProfileId,
  created_at: StoredTimestamp,
  credential_max_lifetime_days: addedInVersion3(Schema.NullOr(CredentialMaxLifetimeDays), () => null),
  // Added within version 3 (migration 0011): a file written before reads null, no origins.
  upstream_origins: Schema.optionalWith(Schema.NullOr(Schema.Array(UpstreamOrigin)), { default: () => null })
})
export const EnvironmentRow = Schema.Struct({ profile: ProfileId, name: EnvironmentName, created_at: StoredTimestamp })
export const ServiceRow = Schema.Struct({
  profile: ProfileId,
  environment: EnvironmentName,
  uuid: ServiceUuid,
  name: StorableText,
  auth_type: AuthType,
  handler: StoredHandler,
  rate_limit: addedInVersion3(Schema.NullOr(RateLimit), () => null),
  // Added within version 3 (migration 0010): a file written before reads false, as before.
  require_dpop: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  // Added within version 3 (migration 0011): a file written before reads false, judged as an owner's URL.
  upstream_approved: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  created_at: StoredTimestamp
})
/** A credential's columns; `CredentialRow` checks its key too. */
export const CredentialColumns = Schema.Struct({
  client_id: ClientId,
  profile: ProfileId,
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  secret_hash: SecretDigest,
  created_at: StoredTimestamp,
  last_used_at: Schema.NullOr(StoredTimestamp),
  deleted_at: Schema.NullOr(StoredTimestamp),
  expires_at: addedInVersion3(Schema.NullOr(StoredTimestamp), () => null),
  expiry_recorded: addedInVersion3(Schema.Boolean, () => false),
  // Added within version 3 (migration 0012): a file written before reads null, no introspection.
  introspect_profiles: Schema.optionalWith(Schema.NullOr(Schema.Array(ProfileId)), { default: () => null })
})
export const CredentialRow = CredentialColumns.pipe(Schema.filter((row) => {
  // A weak key (stored before the key checks, or by other means) verifies nothing; it does not travel
  // while live: the operator deletes that credential first.
  const problem = row.deleted_at === null ? liveKeyProblem(row.secret_hash) : undefined
  return problem === undefined ||
    { path: ["secret_hash"], message: `a live credential's key must be one the API accepts (${problem}): delete it first` }
}))
export const ServerKeyRow = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]{1,64}$/, { message: () => "must be a key name" })),
  value: KeyValue,
  created_at: StoredTimestamp
})

const Base64Url = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => `must be ${what} in base64url` }))

/** A sealed value (`KeyEncryption`): `enc:v1:<iv>:<ciphertext+tag>`. */
export const SEALED_PATTERN = /^enc:v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/

/** A private signing key as stored: a PEM, or sealed with KEY_ENCRYPTION_KEY. Never repeated in a message. */
const StoredPrivateKey = Schema.String.annotations({ message: () => "must be a string" }).pipe(
  Schema.filter((value) => value.startsWith("-----BEGIN") || SEALED_PATTERN.test(value), {
    message: () => "must be a PEM private key or a sealed value (enc:v1:...)"
  })
)

export const SigningKeyRow = Schema.Struct({
  /** The RFC 7638 thumbprint of `public_jwk`. */
  kid: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{43}$/, { message: () => "must be a SHA-256 JWK thumbprint" })),
  public_jwk: Schema.Struct({
    kty: Schema.Literal("RSA"),
    n: Base64Url("a modulus"),
    e: Schema.Literal(RSA_PUBLIC_EXPONENT).annotations({ message: () => "must be AQAB (the public exponent 65537)" })
  }),
  private_key: StoredPrivateKey,
  created_at: StoredTimestamp,
  active_from: StoredTimestamp
})

const NullableText = Schema.NullOr(Schema.String)

export const AuditEventRow = Schema.Struct({
  time: StoredTimestamp,
  actor: Schema.String,
  source: Schema.String,
  action: AuditAction,
  profile: NullableText,
  environment: NullableText,
  service_uuid: NullableText,
  client_id: NullableText,
  details: Schema.NullOr(AuditDetails)
})

/** A trusted issuer's columns (`settings`: the rest of its document, every default applied). */
export const TrustedIssuerColumns = Schema.Struct({
  name: TrustedIssuerName,
  issuer: Schema.String,
  settings: TrustedIssuerSettings,
  created_at: StoredTimestamp,
  updated_at: StoredTimestamp
})
/** A trusted issuer held to what the admin API accepts: its URL (`issuerUrlProblem`), each inline key (`parsePublicJwk`). */
export const TrustedIssuerRow = TrustedIssuerColumns.pipe(Schema.filter((row) => {
  const urlProblem = issuerUrlProblem(row.issuer, row.settings.allow_insecure_loopback, "issuer")
  if (urlProblem !== undefined) return { path: ["issuer"], message: urlProblem }
  const bad = (row.settings.jwks?.keys ?? []).findIndex((key) => parsePublicJwk(key)._tag === "Left")
  return bad < 0 || { path: ["settings", "jwks", "keys", bad], message: "must be a public key the admin API accepts" }
}))

/** Each exported table's row (the completeness check compares their fields with the schema's columns). */
export const TABLE_ROWS = {
  profiles: ProfileRow,
  environments: EnvironmentRow,
  services: ServiceRow,
  credentials: CredentialColumns,
  server_keys: ServerKeyRow,
  signing_keys: SigningKeyRow,
  audit_events: AuditEventRow,
  trusted_issuers: TrustedIssuerColumns
} as const

/** Tables a version-1 file does not have: read as empty. */
const addedInVersion2 = <S extends Schema.Schema.Any>(row: S) => Schema.optionalWith(Schema.Array(row), { default: () => [] })

/**
 * The exported tables, in the order they are imported (parents first). Services, credentials and
 * signing keys are listed in their stored order (`position`), audit events in theirs (`id`).
 */
export const ExportedTables = Schema.Struct({
  profiles: Schema.Array(ProfileRow),
  environments: Schema.Array(EnvironmentRow),
  services: Schema.Array(ServiceRow),
  credentials: Schema.Array(CredentialRow),
  server_keys: Schema.Array(ServerKeyRow),
  signing_keys: addedInVersion2(SigningKeyRow),
  audit_events: addedInVersion2(AuditEventRow),
  // Added within version 3 (migration 0013): a file written before has none.
  trusted_issuers: Schema.optionalWith(Schema.Array(TrustedIssuerRow), { default: () => [] })
})
export type ExportedTables = typeof ExportedTables.Type

/** `profile/environment/uuid`: how a service is named in messages. */
export const serviceKey = (profile: string, environment: string, uuid: string) => `${profile}/${environment}/${uuid}`
