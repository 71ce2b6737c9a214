/**
 * A whole database as one JSON document, and back (`service-auth export` / `import`,
 * docs/operations.md): every profile, environment, service and credential (secret digests: the
 * secrets themselves exist nowhere), the server keys (the credential digest key, and the signing key
 * of databases from before rotation), every signing key with its schedule times and the audit
 * trail, rows as stored (sealed keys stay sealed), so that a database moved from the embedded store
 * to PostgreSQL keeps every credential, every unexpired token, its key schedule and its history.
 *
 * Every table of the migrated schema is either exported (`ExportedTables`) or declared transient
 * (`TRANSIENT_TABLES`); `unclassifiedSchema` finds the ones that are neither, and the export refuses
 * to write an incomplete file while there are any.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either, ParseResult, Schema } from "effect"
import * as Jose from "jose"
import { DIGEST_KEY_NAME } from "../auth/ClientSecrets.js"
import { isSealed } from "../auth/KeyEncryption.js"
import { importSigningKey, SIGNING_KEY_NAME } from "../auth/SigningKeyMaterial.js"
import { AuditAction, AuditDetails } from "../domain/AuditEvents.js"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { AuthType, ServiceHandlerConfig } from "../domain/Models.js"
import { StorableText } from "../domain/Text.js"
import { LEASE_MS } from "./CacheLease.js"
import { catalogueWriteWith } from "./CredentialRepoSql.js"
import { MIGRATIONS_TABLE } from "./Migrations.js"
import { decodeRows } from "./Rows.js"

export const EXPORT_FORMAT = "service-auth-export"
/**
 * Version 2 added `signing_keys` and `audit_events`. A version-1 file (written before) still imports:
 * its missing tables are read as empty. A service-auth that reads only version 1 refuses a version-2
 * file by its version, not by a table it does not know.
 */
export const EXPORT_VERSION = 2
export const READABLE_VERSIONS = [1, 2] as const

/** The file cannot be imported: not JSON, not an export, another version, or a row that is not valid. */
export class InvalidExportFile extends Schema.TaggedError<InvalidExportFile>()("InvalidExportFile", {
  message: Schema.String
}) {}

/** The database cannot be exported, or the file cannot be imported into it; nothing was written. */
export class TransferRefused extends Schema.TaggedError<TransferRefused>()("TransferRefused", {
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------
// The file

const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$/

/**
 * A `timestamptz` as stored: kept as text to the microsecond (a `Date` would drop the last three
 * digits, and a merge compares timestamps exactly).
 */
const StoredTimestamp = Schema.String.pipe(
  Schema.filter((value) => TIMESTAMP_PATTERN.test(value) && !Number.isNaN(Date.parse(value)), {
    message: () => "must be an ISO 8601 date-time with its offset, e.g. 2026-01-01T12:00:00.000000Z"
  })
)

/** An HMAC-SHA256 digest in hexadecimal (`ClientSecrets`). */
const SecretDigest = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "must be an HMAC-SHA256 digest (64 hexadecimal digits)" })
)

/** Key material: whatever is wrong with it, the message never repeats it. */
const KeyValue = Schema.String.annotations({ message: () => "must be a string" }).pipe(
  Schema.filter((value) => value.length > 0, { message: () => "must not be empty" })
)

export const ProfileRow = Schema.Struct({ profile: ProfileId, created_at: StoredTimestamp })
export const EnvironmentRow = Schema.Struct({ profile: ProfileId, name: EnvironmentName, created_at: StoredTimestamp })
export const ServiceRow = Schema.Struct({
  profile: ProfileId,
  environment: EnvironmentName,
  uuid: ServiceUuid,
  name: StorableText,
  auth_type: AuthType,
  handler: ServiceHandlerConfig,
  created_at: StoredTimestamp
})
export const CredentialRow = Schema.Struct({
  client_id: ClientId,
  profile: ProfileId,
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  secret_hash: SecretDigest,
  created_at: StoredTimestamp,
  last_used_at: Schema.NullOr(StoredTimestamp),
  deleted_at: Schema.NullOr(StoredTimestamp)
})
export const ServerKeyRow = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]{1,64}$/, { message: () => "must be a key name" })),
  value: KeyValue,
  created_at: StoredTimestamp
})

const Base64Url = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => `must be ${what} in base64url` }))

/** A sealed value (`KeyEncryption`): `enc:v1:<iv>:<ciphertext+tag>`. */
const SEALED_PATTERN = /^enc:v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/

/** A private signing key as stored: a PEM, or sealed with KEY_ENCRYPTION_KEY. Never repeated in a message. */
const StoredPrivateKey = Schema.String.annotations({ message: () => "must be a string" }).pipe(
  Schema.filter((value) => value.startsWith("-----BEGIN") || SEALED_PATTERN.test(value), {
    message: () => "must be a PEM private key or a sealed value (enc:v1:...)"
  })
)

export const SigningKeyRow = Schema.Struct({
  /** The RFC 7638 thumbprint of `public_jwk`. */
  kid: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{43}$/, { message: () => "must be a SHA-256 JWK thumbprint" })),
  public_jwk: Schema.Struct({ kty: Schema.Literal("RSA"), n: Base64Url("a modulus"), e: Base64Url("an exponent") }),
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

/** Each exported table's row (the completeness check compares their fields with the schema's columns). */
const TABLE_ROWS = {
  profiles: ProfileRow,
  environments: EnvironmentRow,
  services: ServiceRow,
  credentials: CredentialRow,
  server_keys: ServerKeyRow,
  signing_keys: SigningKeyRow,
  audit_events: AuditEventRow
} as const

/** Tables a version-1 file does not have: read as empty. */
const addedInVersion2 = <S extends Schema.Schema.Any>(row: S) =>
  Schema.optionalWith(Schema.Array(row), { default: () => [] })

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
  audit_events: addedInVersion2(AuditEventRow)
})
export type ExportedTables = typeof ExportedTables.Type

export const EXPORTED_TABLES = Object.keys(TABLE_ROWS) as ReadonlyArray<keyof ExportedTables>

/** Tables whose rows stay where they are, and why moving them would be wrong or useless. */
export const TRANSIENT_TABLES: Readonly<Record<string, string>> = {
  auth_failures: "failed client authentications of the last minute: counters that may start again from zero",
  cache_leases: "the running instances' cache leases: they belong to processes, not to the data",
  catalogue_version: "the caches' change counter: the import bumps the target's own",
  [MIGRATIONS_TABLE]: "the migrations applied: the target is migrated by the importing service-auth itself"
}

/**
 * Columns of exported tables that are not in the file: `position` (a serial) only orders services,
 * credentials and signing keys, and `id` (a `bigserial`) only orders audit events; the file keeps
 * the order (rows in that order) and the target numbers them itself, after its own rows on a merge.
 */
export const REASSIGNED_COLUMNS: Readonly<Record<string, ReadonlyArray<string>>> = {
  services: ["position"],
  credentials: ["position"],
  signing_keys: ["position"],
  audit_events: ["id"]
}

const serviceKey = (profile: string, environment: string, uuid: string) => `${profile}/${environment}/${uuid}`

/** What the schema of each row cannot see: keys unique, parents present, the credential limit, the digest key. */
const inconsistency = (tables: ExportedTables): string | undefined => {
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
    ["signing key", duplicate(tables.signing_keys, (r) => r.kid)]
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
    if (live.get(key)! > 2) return `service ${key} has more than 2 live credentials`
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

export const ExportDocument = Schema.Struct({
  format: Schema.Literal(EXPORT_FORMAT),
  version: Schema.Literal(...READABLE_VERSIONS),
  exported_at: StoredTimestamp,
  /** The last migration applied to the exported database: a target must know it. */
  schema_version: Schema.Int,
  tables: ExportedTables.pipe(Schema.filter((tables) => inconsistency(tables) ?? true))
})
export type ExportDocument = typeof ExportDocument.Type

// Unknown fields are refused, not dropped: they would be data of a newer schema, silently lost.
const decodeDocument = Schema.decodeUnknownEither(ExportDocument, { onExcessProperty: "error", errors: "first" })

/** `tables.credentials[3].secret_hash`: where in the file. */
const describePath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join("")

/** The first problem of a decode, where it is and what is wrong, without the value itself. */
const describeIssue = (error: ParseResult.ParseError): string => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issue === undefined) return "not a valid export"
  const where = issue.path.length === 0 ? "the document" : describePath(issue.path)
  // The default messages of a type mismatch quote the value: say only what was expected.
  const message = issue._tag === "Type" && /^Expected .*, actual /s.test(issue.message)
    ? issue.message.replace(/, actual .*$/s, "")
    : issue._tag === "Unexpected"
    ? "is not a field of this format"
    : issue._tag === "Missing"
    ? "is missing"
    : issue.message
  return `${where}: ${message}`
}

/** The whole file checked, before anything touches a database. */
export const parseExport = (text: string): Either.Either<ExportDocument, InvalidExportFile> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(new InvalidExportFile({ message: `not JSON (${(error as Error).message})` }))
  }
  const header = json as { format?: unknown; version?: unknown } | null
  if (typeof header !== "object" || header === null || header.format !== EXPORT_FORMAT) {
    return Either.left(new InvalidExportFile({ message: `not a service-auth export ("format" is not "${EXPORT_FORMAT}")` }))
  }
  if (!(READABLE_VERSIONS as ReadonlyArray<unknown>).includes(header.version)) {
    return Either.left(
      new InvalidExportFile({
        message: `export format version ${JSON.stringify(header.version)} is not one this service-auth reads (${
          READABLE_VERSIONS.join(", ")
        })`
      })
    )
  }
  return Either.mapLeft(decodeDocument(json), (error) => new InvalidExportFile({ message: describeIssue(error) }))
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

// ---------------------------------------------------------------------------------------------
// Counting

export interface TableCounts {
  readonly profiles: number
  readonly environments: number
  readonly services: number
  readonly credentials: number
  /** Of `credentials`, the tombstones (deleted credentials, kept so a client id is never reused). */
  readonly deletedCredentials: number
  /** Server keys and signing keys. */
  readonly keys: number
  /** Of `keys`, the signing keys (`signing_keys`). */
  readonly signingKeys: number
  readonly auditEvents: number
}

export const countTables = (tables: ExportedTables): TableCounts => ({
  profiles: tables.profiles.length,
  environments: tables.environments.length,
  services: tables.services.length,
  credentials: tables.credentials.length,
  deletedCredentials: tables.credentials.filter((c) => c.deleted_at !== null).length,
  keys: tables.server_keys.length + tables.signing_keys.length,
  signingKeys: tables.signing_keys.length,
  auditEvents: tables.audit_events.length
})

/** The counts that are not part of another (a sum of them counts each row once). */
export const DISTINCT_COUNTS = ["profiles", "environments", "services", "credentials", "keys", "auditEvents"] as const

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** `1 profile, 2 environments, 3 services, 4 credentials (1 deleted), 3 keys (2 signing), 5 audit events` */
export const describeCounts = (counts: TableCounts): string =>
  `${plural(counts.profiles, "profile")}, ${plural(counts.environments, "environment")}, ${
    plural(counts.services, "service")
  }, ${plural(counts.credentials, "credential")} (${counts.deletedCredentials} deleted), ${plural(counts.keys, "key")} (${
    counts.signingKeys
  } signing), ${plural(counts.auditEvents, "audit event")}`

// ---------------------------------------------------------------------------------------------
// The schema

const TableNameRow = Schema.Struct({ table_name: Schema.String })
const ColumnRow = Schema.Struct({ table_name: Schema.String, column_name: Schema.String })

/**
 * What the file would miss: tables of the migrated schema neither exported nor declared transient,
 * and columns of exported tables that are neither in the file nor reassigned. Empty when complete.
 */
export const unclassifiedSchema = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`.pipe(
    decodeRows(TableNameRow)
  )
  const columns = yield* sql`
    SELECT table_name, column_name FROM information_schema.columns
    WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`.pipe(decodeRows(ColumnRow))
  const problems: Array<string> = []
  for (const { table_name: table } of tables) {
    const exported = Object.hasOwn(TABLE_ROWS, table) ? TABLE_ROWS[table as keyof typeof TABLE_ROWS] : undefined
    if (exported === undefined) {
      if (!(table in TRANSIENT_TABLES)) problems.push(`table ${table}`)
      continue
    }
    const known = new Set([...Object.keys(exported.fields), ...(REASSIGNED_COLUMNS[table] ?? [])])
    for (const column of columns) {
      if (column.table_name === table && !known.has(column.column_name)) problems.push(`column ${table}.${column.column_name}`)
    }
  }
  return problems
})

// ---------------------------------------------------------------------------------------------
// Export

/** A `timestamptz` column as `StoredTimestamp` text: UTC, to the microsecond. */
const asText = (sql: SqlClient.SqlClient, column: string) =>
  sql.literal(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS ${column}`)

const MigratedRow = Schema.Struct({ migrated: Schema.Boolean })

/** Whether service-auth has ever migrated this database (an export must not create a schema in a stranger's). */
export const isMigrated = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql`SELECT to_regclass(${MIGRATIONS_TABLE}) IS NOT NULL AS migrated`.pipe(decodeRows(MigratedRow))
  return row?.migrated === true
})

const LatestMigrationRow = Schema.Struct({ id: Schema.NullOr(Schema.Number) })

const latestMigration = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql`SELECT max(migration_id) AS id FROM ${sql(MIGRATIONS_TABLE)}`.pipe(decodeRows(LatestMigrationRow))
  return row?.id ?? 0
})

/**
 * Reads every exported table in one snapshot (REPEATABLE READ: instances may be writing to
 * PostgreSQL meanwhile) and checks the document as an import would: a file written here imports.
 */
export const exportDatabase = Effect.fn("Transfer.exportDatabase")(function*() {
  const sql = yield* SqlClient.SqlClient
  const missing = yield* unclassifiedSchema
  if (missing.length > 0) {
    return yield* new TransferRefused({
      message: `this service-auth does not know how to export ${missing.join(", ")}: the file would be incomplete`
    })
  }
  const read = Effect.gen(function*() {
    yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
    const profiles = yield* sql`SELECT profile, ${asText(sql, "created_at")} FROM profiles ORDER BY profile`
    const environments = yield* sql`
      SELECT profile, name, ${asText(sql, "created_at")} FROM environments ORDER BY profile, name`
    const services = yield* sql`
      SELECT profile, environment, uuid, name, auth_type, handler, ${asText(sql, "created_at")}
      FROM services ORDER BY position`
    const credentials = yield* sql`
      SELECT client_id, profile, environment, service_uuid, secret_hash, ${asText(sql, "created_at")},
             ${asText(sql, "last_used_at")}, ${asText(sql, "deleted_at")}
      FROM credentials ORDER BY position`
    const serverKeys = yield* sql`SELECT name, value, ${asText(sql, "created_at")} FROM server_keys ORDER BY name`
    const signingKeys = yield* sql`
      SELECT kid, public_jwk, private_key, ${asText(sql, "created_at")}, ${asText(sql, "active_from")}
      FROM signing_keys ORDER BY position`
    const auditEvents = yield* sql`
      SELECT ${asText(sql, "time")}, actor, source, action, profile, environment, service_uuid, client_id, details
      FROM audit_events ORDER BY id`
    return {
      profiles,
      environments,
      services,
      credentials,
      server_keys: serverKeys,
      signing_keys: signingKeys,
      audit_events: auditEvents
    }
  }).pipe(sql.withTransaction)
  const tables = yield* read
  const document = {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    exported_at: new Date(yield* Clock.currentTimeMillis).toISOString(),
    schema_version: yield* latestMigration,
    tables
  }
  const checked = decodeDocument(document)
  if (Either.isLeft(checked)) {
    return yield* new TransferRefused({
      message: `the database holds a row an import would refuse (${describeIssue(checked.left)})`
    })
  }
  yield* checkKeys(checked.right.tables).pipe(
    Effect.mapError((invalid) => new TransferRefused({ message: `the database holds a row an import would refuse (${invalid.message})` }))
  )
  return checked.right
})

// ---------------------------------------------------------------------------------------------
// Import

export interface ImportSummary {
  /** `replace`: the target held no catalogue; `merge`: what was missing was added. */
  readonly mode: "replace" | "merge"
  /** What the file holds. */
  readonly file: TableCounts
  /** Rows written (inserted; on a merge, rows already present are not counted). */
  readonly added: TableCounts
  /** Credentials live in the target and deleted in the file, now deleted in the target too. */
  readonly revoked: number
  /**
   * Keys the target held with another value, replaced by the file's (only where no live credential
   * depended on them): server key names, and `signing_keys` for the target's set of signing keys.
   */
  readonly replacedKeys: ReadonlyArray<string>
  /**
   * Whether servers running on the target must restart to use the file's keys: the digest key is
   * loaded only at start, and so is a signing key from before rotation adopted. Signing keys are
   * reloaded every 2 s by running servers.
   */
  readonly restartNeeded: boolean
}

const VersionRow = Schema.Struct({ version: Schema.String })
const CountRow = Schema.Struct({ profiles: Schema.Number, credentials: Schema.Number, live: Schema.Number })
const ValueRow = Schema.Struct({ value: Schema.String })
const SameRow = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Boolean) })
const LiveRow = Schema.Struct({ profile: Schema.String, environment: Schema.String, service_uuid: Schema.String, live: Schema.Number })
const RevokedRow = Schema.Struct({ revoked: Schema.Boolean })
const LastRow = Schema.Struct({ last: Schema.String })
const KidRow = Schema.Struct({ kid: Schema.String })
const LegacyRow = Schema.Struct({ value: Schema.String })

/**
 * The target's signing keys against the file's: `difference` says how they differ (undefined when
 * they are the same, "none" when the target has none). Rows are the same when the same kids come in
 * the same order with the same public key and times; how the private half is stored may differ
 * (sealed with another KEY_ENCRYPTION_KEY, or not): the kid is the public key's thumbprint, and the
 * target's form is the one its servers open. A file with only a legacy key (`server_keys`
 * `signing_key`) is the same as a target with that value, or whose rows hold its kid (a server
 * there adopted it).
 */
const compareSigningKeys = (tables: ExportedTables) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const target = (yield* sql`SELECT kid FROM signing_keys ORDER BY position`.pipe(decodeRows(KidRow))).map((r) => r.kid)
    const [targetLegacy] = yield* sql`SELECT value FROM server_keys WHERE name = ${SIGNING_KEY_NAME}`.pipe(decodeRows(LegacyRow))
    const targetHasRows = target.length > 0
    const answer = (difference: string | undefined) => ({ targetHasRows, difference })
    if (!targetHasRows && targetLegacy === undefined) return answer("none")

    const file = tables.signing_keys
    const fileLegacy = tables.server_keys.find((k) => k.name === SIGNING_KEY_NAME)
    if (file.length === 0) {
      if (fileLegacy === undefined) return answer(undefined) // nothing to compare: the target keeps its keys
      if (!targetHasRows) return answer(targetLegacy!.value === fileLegacy.value ? undefined : "another signing key")
      const kid = isSealed(fileLegacy.value) ? "(sealed)" : (yield* Effect.promise(() => importSigningKey(fileLegacy.value))).kid
      return answer(target.includes(kid) ? undefined : `the file's key ${kid} is not among the target's ${target.join(", ")}`)
    }
    if (!targetHasRows) return answer("the target holds a signing key from before rotation, the file holds rotating keys")

    const onlyFile = file.filter((key) => !target.includes(key.kid)).map((key) => key.kid)
    const onlyTarget = target.filter((kid) => !file.some((key) => key.kid === kid))
    if (onlyFile.length > 0 || onlyTarget.length > 0) {
      return answer(
        [
          onlyFile.length > 0 ? `only in the file: ${onlyFile.join(", ")}` : undefined,
          onlyTarget.length > 0 ? `only in the target: ${onlyTarget.join(", ")}` : undefined
        ].filter((part) => part !== undefined).join("; ")
      )
    }
    for (const [index, key] of file.entries()) {
      const [same] = yield* sql`
        SELECT public_jwk = ${JSON.stringify(key.public_jwk)}::jsonb AS public_jwk,
               created_at = ${key.created_at}::timestamptz AS created_at,
               active_from = ${key.active_from}::timestamptz AS active_from
        FROM signing_keys WHERE kid = ${key.kid}`.pipe(decodeRows(SameRow))
      const different = Object.entries(same ?? {}).filter(([, equal]) => equal !== true).map(([column]) => column)
      if (different.length > 0) return answer(`key ${key.kid} has another ${different.join(", ")}`)
      if (target[index] !== key.kid) return answer("the keys were added in another order")
    }
    return answer(undefined)
  })

/** Why a key of the target must equal the file's on a merge, in the operator's terms. */
const keyMismatch = (name: string) =>
  name === DIGEST_KEY_NAME
    ? "the target's credential digest key differs from the file's, and its live credentials depend on it: " +
      "the imported credentials could never authenticate there"
    : name === SIGNING_KEY_NAME
    ? "the target's signing key differs from the file's, and its live credentials' tokens depend on it: " +
      "tokens issued before the export would not verify there"
    : `the target's server key ${name} differs from the file's, and its live credentials may depend on it`

/**
 * Imports `document` in one transaction, through the catalogue-write path (the version is bumped
 * and running instances are told to empty their caches when it commits). All or nothing: any
 * refusal rolls everything back.
 *
 * - Target empty (no profile and no credential, not even deleted ones; a server that merely started
 *   there has generated keys, which are replaced by the file's): everything is inserted.
 * - Otherwise refused unless `merge`. A merge inserts what is missing; a row present with other
 *   content is a conflict that refuses the import, except two columns of credentials where the
 *   safe value wins: `deleted_at` (a deletion on either side stays a deletion, the earlier one) and
 *   `last_used_at` (the later). Keys must be identical or absent in the target, unless the target
 *   has no live credential: then nothing depends on its keys, and the file's replace them. Signing
 *   keys count as one set (`compareSigningKeys`), replaced whole, inserted in the file's order.
 * - Either way, no service may end with more than 2 live credentials, and the file's audit events
 *   the target does not hold yet are appended in the file's order.
 */
export const importDatabase = Effect.fn("Transfer.importDatabase")(function*(
  document: ExportDocument,
  options: { readonly merge: boolean }
) {
  const sql = yield* SqlClient.SqlClient
  const refuse = (message: string) => Effect.fail(new TransferRefused({ message: `${message}; nothing was imported` }))
  const { tables } = document

  return yield* Effect.gen(function*() {
    // This transaction's version (catalogueWrite has bumped it, and holds the row until the commit).
    const [{ version }] = yield* sql`SELECT version::text AS version FROM catalogue_version`.pipe(decodeRows(VersionRow))
    const known = yield* latestMigration
    if (document.schema_version > known) {
      return yield* refuse(
        `the file comes from a database at schema version ${document.schema_version}, newer than this one (${known}): ` +
          "import it with the service-auth version that exported it, or a newer one"
      )
    }
    const [present] = yield* sql`
      SELECT (SELECT count(*) FROM profiles)::int AS profiles, (SELECT count(*) FROM credentials)::int AS credentials,
             (SELECT count(*) FROM credentials WHERE deleted_at IS NULL)::int AS live`.pipe(decodeRows(CountRow))
    const empty = present!.profiles === 0 && present!.credentials === 0
    if (!empty && !options.merge) {
      return yield* refuse(
        `the target database is not empty (${plural(present!.profiles, "profile")}, ${
          plural(present!.credentials, "credential")
        }); --merge adds what is missing`
      )
    }

    // Only live credentials (their digests, their tokens) depend on the target's keys: with none,
    // replacing its keys breaks nothing.
    const keysReplaceable = present!.live === 0
    const replacedKeys: Array<string> = []
    let restartNeeded = false
    let keys = 0

    // The signing keys, as one set: the file's replace the target's, or are the same. A database
    // from before rotation has its one key in server_keys (`signing_key`), adopted by the next
    // server to start; a target's rows would make that server drop it, so they go when it comes.
    const signing = yield* compareSigningKeys(tables)
    const fileHasSigningKeys = tables.signing_keys.length > 0 || tables.server_keys.some((k) => k.name === SIGNING_KEY_NAME)
    const differs = fileHasSigningKeys && signing.difference !== undefined
    if (differs && signing.difference !== "none" && !keysReplaceable) {
      return yield* refuse(
        `the target's signing keys differ from the file's (${signing.difference}), and its live credentials' tokens ` +
          "depend on them: tokens the target issued would no longer verify"
      )
    }
    let signingKeys = 0
    if (differs) {
      if (signing.targetHasRows) replacedKeys.push("signing_keys")
      yield* sql`DELETE FROM signing_keys`
      // Inserted in the file's order: the target's positions keep it.
      for (const key of tables.signing_keys) {
        yield* sql`
          INSERT INTO signing_keys (kid, public_jwk, private_key, created_at, active_from)
          VALUES (${key.kid}, ${JSON.stringify(key.public_jwk)}::jsonb, ${key.private_key}, ${key.created_at}::timestamptz,
                  ${key.active_from}::timestamptz)`
        signingKeys++
      }
    }
    // The legacy key is kept only for a file that brings no signing key rows (the target's next
    // server adopts it); beside rows, a server drops it at start anyway.
    const legacyKeyWanted = tables.signing_keys.length === 0 && differs

    for (const key of tables.server_keys) {
      if (key.name === SIGNING_KEY_NAME && !legacyKeyWanted) continue
      const [existing] = yield* sql`SELECT value FROM server_keys WHERE name = ${key.name}`.pipe(decodeRows(ValueRow))
      if (existing?.value === key.value) continue
      if (existing !== undefined) {
        // The legacy signing key was compared with the target's whole signing key set above.
        if (!keysReplaceable) return yield* refuse(keyMismatch(key.name))
        replacedKeys.push(key.name)
        if (key.name === DIGEST_KEY_NAME) restartNeeded = true
      }
      // Only a server's start adopts it, and a running one holds the target's former keys.
      if (key.name === SIGNING_KEY_NAME && signing.difference !== "none") restartNeeded = true
      yield* sql`
        INSERT INTO server_keys (name, value, created_at) VALUES (${key.name}, ${key.value}, ${key.created_at}::timestamptz)
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at`
      keys++
    }
    if (tables.signing_keys.length > 0 && differs) {
      const removed = yield* sql`DELETE FROM server_keys WHERE name = ${SIGNING_KEY_NAME} RETURNING name`
      if (removed.length > 0) replacedKeys.push(SIGNING_KEY_NAME)
    }
    keys += signingKeys

    /** Inserted (true), or already there with the same content (false); otherwise a conflict naming the row. */
    const insertOrMatch = (
      row: string,
      insert: Effect.Effect<ReadonlyArray<unknown>, unknown>,
      compare: Effect.Effect<ReadonlyArray<unknown>, unknown>
    ) =>
      Effect.gen(function*() {
        if ((yield* insert).length > 0) return true
        const [same] = yield* compare.pipe(decodeRows(SameRow))
        const different = Object.entries(same ?? {}).filter(([, equal]) => equal !== true).map(([column]) => column)
        if (different.length > 0) {
          return yield* refuse(`${row} exists in the target with another ${different.join(", ")} (a conflict)`)
        }
        return false
      })

    let profiles = 0
    for (const r of tables.profiles) {
      const added = yield* insertOrMatch(
        `profile ${r.profile}`,
        sql`INSERT INTO profiles (profile, created_at) VALUES (${r.profile}, ${r.created_at}::timestamptz)
            ON CONFLICT (profile) DO NOTHING RETURNING profile`,
        sql`SELECT created_at = ${r.created_at}::timestamptz AS created_at FROM profiles WHERE profile = ${r.profile}`
      )
      if (added) profiles++
    }
    let environments = 0
    for (const r of tables.environments) {
      const added = yield* insertOrMatch(
        `environment ${r.profile}/${r.name}`,
        sql`INSERT INTO environments (profile, name, created_at) VALUES (${r.profile}, ${r.name}, ${r.created_at}::timestamptz)
            ON CONFLICT (profile, name) DO NOTHING RETURNING name`,
        sql`SELECT created_at = ${r.created_at}::timestamptz AS created_at
            FROM environments WHERE profile = ${r.profile} AND name = ${r.name}`
      )
      if (added) environments++
    }
    let services = 0
    for (const r of tables.services) {
      const handler = JSON.stringify(r.handler)
      const added = yield* insertOrMatch(
        `service ${serviceKey(r.profile, r.environment, r.uuid)}`,
        sql`INSERT INTO services (profile, environment, uuid, name, auth_type, handler, created_at)
            VALUES (${r.profile}, ${r.environment}, ${r.uuid}, ${r.name}, ${r.auth_type}, ${handler}::jsonb,
                    ${r.created_at}::timestamptz)
            ON CONFLICT (profile, environment, uuid) DO NOTHING RETURNING uuid`,
        sql`SELECT name = ${r.name} AS name, auth_type = ${r.auth_type} AS auth_type, handler = ${handler}::jsonb AS handler,
                   created_at = ${r.created_at}::timestamptz AS created_at
            FROM services WHERE profile = ${r.profile} AND environment = ${r.environment} AND uuid = ${r.uuid}`
      )
      if (added) services++
    }
    let credentials = 0
    let deletedCredentials = 0
    let revoked = 0
    for (const r of tables.credentials) {
      const added = yield* insertOrMatch(
        `credential ${r.client_id}`,
        sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at, last_used_at, deleted_at)
            VALUES (${r.client_id}, ${r.profile}, ${r.environment}, ${r.service_uuid}, ${r.secret_hash},
                    ${r.created_at}::timestamptz, ${r.last_used_at}::timestamptz, ${r.deleted_at}::timestamptz)
            ON CONFLICT (client_id) DO NOTHING RETURNING client_id`,
        sql`SELECT profile = ${r.profile} AND environment = ${r.environment} AND service_uuid = ${r.service_uuid} AS service,
                   secret_hash = ${r.secret_hash} AS secret_hash, created_at = ${r.created_at}::timestamptz AS created_at
            FROM credentials WHERE client_id = ${r.client_id}`
      )
      if (added) {
        credentials++
        if (r.deleted_at !== null) deletedCredentials++
        continue
      }
      // Present alike: a deletion on either side stays one (revocation is never undone by an import).
      const [update] = yield* sql`
        WITH before AS (SELECT deleted_at FROM credentials WHERE client_id = ${r.client_id})
        UPDATE credentials SET last_used_at = GREATEST(last_used_at, ${r.last_used_at}::timestamptz),
                               deleted_at = LEAST(deleted_at, ${r.deleted_at}::timestamptz)
        WHERE client_id = ${r.client_id}
        RETURNING ((SELECT deleted_at FROM before) IS NULL AND deleted_at IS NOT NULL) AS revoked`.pipe(
        decodeRows(RevokedRow)
      )
      if (update?.revoked === true) revoked++
    }

    const [overLimit] = yield* sql`
      SELECT profile, environment, service_uuid, count(*)::int AS live FROM credentials WHERE deleted_at IS NULL
      GROUP BY profile, environment, service_uuid HAVING count(*) > 2
      ORDER BY profile, environment, service_uuid LIMIT 1`.pipe(decodeRows(LiveRow))
    if (overLimit !== undefined) {
      return yield* refuse(
        `service ${serviceKey(overLimit.profile, overLimit.environment, overLimit.service_uuid)} would have ${overLimit.live} ` +
          "live credentials, at most 2 are allowed"
      )
    }

    // The history: the file's events the target does not hold yet (as it was before this import,
    // so that identical events within the file all count), appended in the file's order.
    const [{ last }] = yield* sql`SELECT coalesce(max(id), 0)::text AS last FROM audit_events`.pipe(decodeRows(LastRow))
    let auditEvents = 0
    for (const e of tables.audit_events) {
      const details = e.details === null ? null : JSON.stringify(e.details)
      const inserted = yield* sql`
        INSERT INTO audit_events (time, actor, source, action, profile, environment, service_uuid, client_id, details)
        SELECT ${e.time}::timestamptz, ${e.actor}::text, ${e.source}::text, ${e.action}::text, ${e.profile}::text,
               ${e.environment}::text, ${e.service_uuid}::text, ${e.client_id}::text, ${details}::jsonb
        WHERE NOT EXISTS (
          SELECT 1 FROM audit_events
          WHERE id <= ${last}::bigint AND time = ${e.time}::timestamptz AND actor = ${e.actor} AND source = ${e.source}
            AND action = ${e.action} AND profile IS NOT DISTINCT FROM ${e.profile}::text
            AND environment IS NOT DISTINCT FROM ${e.environment}::text
            AND service_uuid IS NOT DISTINCT FROM ${e.service_uuid}::text
            AND client_id IS NOT DISTINCT FROM ${e.client_id}::text AND details IS NOT DISTINCT FROM ${details}::jsonb)
        RETURNING id`
      auditEvents += inserted.length
    }

    const summary: ImportSummary = {
      mode: empty ? "replace" : "merge",
      file: countTables(tables),
      added: { profiles, environments, services, credentials, deletedCredentials, keys, signingKeys, auditEvents },
      revoked,
      replacedKeys,
      restartNeeded
    }
    return { summary, version }
  }).pipe(
    catalogueWriteWith(sql),
    Effect.tap(({ version }) => awaitCaches(version)),
    Effect.map(({ summary }) => summary)
  )
})

const BehindRow = Schema.Struct({ behind: Schema.Number })

/**
 * After the import committed, as after an admin change: returns once every running instance's cache
 * lease has acknowledged `version` (so a credential the merge deleted is refused everywhere from
 * then on), or once a lease's length has passed (every lease renewed before the commit has then run
 * out). Without running instances (the embedded database, a stopped deployment), at once.
 */
const awaitCaches = (version: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const deadline = (yield* Clock.currentTimeMillis) + LEASE_MS + 100
    while ((yield* Clock.currentTimeMillis) < deadline) {
      const [row] = yield* sql`
        SELECT count(*)::int AS behind FROM cache_leases
        WHERE expires_at > clock_timestamp() AND acked_version < ${version}::bigint`.pipe(decodeRows(BehindRow))
      if (row?.behind === 0) return
      yield* Effect.sleep("50 millis")
    }
  })
