/**
 * A whole database as one JSON document, and back (`service-auth export` / `import`,
 * docs/operations.md): every profile, environment, service and credential (secret digests: the
 * secrets themselves exist nowhere) and the server keys (the signing key, the credential digest
 * key), rows as stored, so that a database moved from the embedded store to PostgreSQL keeps every
 * credential and every unexpired token working.
 *
 * Every table of the migrated schema is either exported (`ExportedTables`) or declared transient
 * (`TRANSIENT_TABLES`); `unclassifiedSchema` finds the ones that are neither, and the export refuses
 * to write an incomplete file while there are any.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either, ParseResult, Schema } from "effect"
import { DIGEST_KEY_NAME } from "../auth/ClientSecrets.js"
import { SIGNING_KEY_NAME } from "../auth/KeyService.js"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { AuthType, ServiceHandlerConfig } from "../domain/Models.js"
import { StorableText } from "../domain/Text.js"
import { LEASE_MS } from "./CacheLease.js"
import { catalogueWriteWith } from "./CredentialRepoSql.js"
import { MIGRATIONS_TABLE } from "./Migrations.js"
import { decodeRows } from "./Rows.js"

export const EXPORT_FORMAT = "service-auth-export"
export const EXPORT_VERSION = 1

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

/**
 * The exported tables, in the order they are imported (parents first). Services and credentials are
 * listed in their stored order (`position`).
 */
export const ExportedTables = Schema.Struct({
  profiles: Schema.Array(ProfileRow),
  environments: Schema.Array(EnvironmentRow),
  services: Schema.Array(ServiceRow),
  credentials: Schema.Array(CredentialRow),
  server_keys: Schema.Array(ServerKeyRow)
})
export type ExportedTables = typeof ExportedTables.Type

export const EXPORTED_TABLES = Object.keys(ExportedTables.fields) as ReadonlyArray<keyof ExportedTables>

/** Tables whose rows stay where they are, and why moving them would be wrong or useless. */
export const TRANSIENT_TABLES: Readonly<Record<string, string>> = {
  auth_failures: "failed client authentications of the last minute: counters that may start again from zero",
  cache_leases: "the running instances' cache leases: they belong to processes, not to the data",
  catalogue_version: "the caches' change counter: the import bumps the target's own",
  [MIGRATIONS_TABLE]: "the migrations applied: the target is migrated by the importing service-auth itself"
}

/**
 * Columns of exported tables that are not in the file: `position` (a `bigserial`) only orders
 * services and credentials; the file keeps the order (rows in position order) and the target
 * numbers them itself, after its own rows on a merge.
 */
export const REASSIGNED_COLUMNS: Readonly<Record<string, ReadonlyArray<string>>> = {
  services: ["position"],
  credentials: ["position"]
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
    ["server key", duplicate(tables.server_keys, (r) => r.name)]
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
  const digestKey = tables.server_keys.find((k) => k.name === DIGEST_KEY_NAME)
  if (digestKey !== undefined && !/^[A-Za-z0-9_-]{43,}$/.test(digestKey.value)) {
    return `server key ${DIGEST_KEY_NAME} is not a base64url key of at least 256 bits`
  }
  const signingKey = tables.server_keys.find((k) => k.name === SIGNING_KEY_NAME)
  if (signingKey !== undefined && !signingKey.value.includes("-----BEGIN")) {
    return `server key ${SIGNING_KEY_NAME} is not a PEM private key`
  }
  return undefined
}

export const ExportDocument = Schema.Struct({
  format: Schema.Literal(EXPORT_FORMAT),
  version: Schema.Literal(EXPORT_VERSION),
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
  if (header.version !== EXPORT_VERSION) {
    return Either.left(
      new InvalidExportFile({
        message: `export format version ${JSON.stringify(header.version)} is not one this service-auth reads (${EXPORT_VERSION})`
      })
    )
  }
  return Either.mapLeft(decodeDocument(json), (error) => new InvalidExportFile({ message: describeIssue(error) }))
}

// ---------------------------------------------------------------------------------------------
// Counting

export interface TableCounts {
  readonly profiles: number
  readonly environments: number
  readonly services: number
  readonly credentials: number
  /** Of `credentials`, the tombstones (deleted credentials, kept so a client id is never reused). */
  readonly deletedCredentials: number
  readonly keys: number
}

export const countTables = (tables: ExportedTables): TableCounts => ({
  profiles: tables.profiles.length,
  environments: tables.environments.length,
  services: tables.services.length,
  credentials: tables.credentials.length,
  deletedCredentials: tables.credentials.filter((c) => c.deleted_at !== null).length,
  keys: tables.server_keys.length
})

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** `1 profile, 2 environments, 3 services, 4 credentials (1 deleted), 2 keys` */
export const describeCounts = (counts: TableCounts): string =>
  `${plural(counts.profiles, "profile")}, ${plural(counts.environments, "environment")}, ${
    plural(counts.services, "service")
  }, ${plural(counts.credentials, "credential")} (${counts.deletedCredentials} deleted), ${plural(counts.keys, "key")}`

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
    const exported = ExportedTables.fields[table as keyof ExportedTables]
    if (exported === undefined) {
      if (!(table in TRANSIENT_TABLES)) problems.push(`table ${table}`)
      continue
    }
    const known = new Set([...Object.keys(exported.value.fields), ...(REASSIGNED_COLUMNS[table] ?? [])])
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
    return { profiles, environments, services, credentials, server_keys: serverKeys }
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
  /** Keys the target held with another value, replaced by the file's (only where no live credential depended on them). */
  readonly replacedKeys: ReadonlyArray<string>
}

const VersionRow = Schema.Struct({ version: Schema.String })
const CountRow = Schema.Struct({ profiles: Schema.Number, credentials: Schema.Number, live: Schema.Number })
const ValueRow = Schema.Struct({ value: Schema.String })
const SameRow = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Boolean) })
const LiveRow = Schema.Struct({ profile: Schema.String, environment: Schema.String, service_uuid: Schema.String, live: Schema.Number })
const RevokedRow = Schema.Struct({ revoked: Schema.Boolean })

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
 *   has no live credential: then nothing depends on its keys, and the file's replace them.
 * - Either way, no service may end with more than 2 live credentials.
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
    let keys = 0
    for (const key of tables.server_keys) {
      const [existing] = yield* sql`SELECT value FROM server_keys WHERE name = ${key.name}`.pipe(decodeRows(ValueRow))
      if (existing?.value === key.value) continue
      if (existing !== undefined) {
        if (!keysReplaceable) return yield* refuse(keyMismatch(key.name))
        replacedKeys.push(key.name)
      }
      yield* sql`
        INSERT INTO server_keys (name, value, created_at) VALUES (${key.name}, ${key.value}, ${key.created_at}::timestamptz)
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at`
      keys++
    }

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

    const summary: ImportSummary = {
      mode: empty ? "replace" : "merge",
      file: countTables(tables),
      added: { profiles, environments, services, credentials, deletedCredentials, keys },
      revoked,
      replacedKeys
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
