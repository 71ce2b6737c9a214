/**
 * The database's schema as an export sees it: every table of the migrated schema is either exported
 * (`ExportRows`) or declared transient here; `unclassifiedSchema` finds the ones that are neither,
 * and the export refuses to write an incomplete file while there are any.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { MIGRATIONS_TABLE } from "../storage/Storage.js"
import { parseFailureIsDefect } from "../storage/StorageErrors.js"
import { TABLE_ROWS } from "./ExportRows.js"

/** Tables whose rows stay where they are, and why moving them would be wrong or useless. */
export const TRANSIENT_TABLES: Readonly<Record<string, string>> = {
  admin_tokens: "the admin tokens managed at run time: credentials of this deployment, never carried in a file " +
    "(not even as digests); the target is managed with its own tokens",
  auth_failures: "failed client authentications of the last minute: counters that may start again from zero",
  cache_leases: "the running instances' cache leases: they belong to processes, not to the data",
  catalogue_version: "the caches' change counter: the import bumps the target's own",
  revoked_tokens: "access tokens revoked by their clients, kept an hour at most (until each token's exp): not carried, " +
    "so a move within the hour after a revocation should be made with the source stopped for that hour, or the " +
    "credential rotated",
  seen_jtis: "ids of client assertions and DPoP proofs of the last minutes: each expires with its JWT, within 5 minutes",
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

const TableNameRow = Schema.Struct({ table_name: Schema.String })
const ColumnRow = Schema.Struct({ table_name: Schema.String, column_name: Schema.String })

/**
 * What the file would miss: tables of the migrated schema neither exported nor declared transient,
 * and columns of exported tables that are neither in the file nor reassigned. Empty when complete.
 */
export const unclassifiedSchema = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* SqlSchema.findAll({
    Request: Schema.Void,
    Result: TableNameRow,
    execute: () =>
      sql`SELECT table_name FROM information_schema.tables
          WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
  })(undefined).pipe(parseFailureIsDefect)
  const columns = yield* SqlSchema.findAll({
    Request: Schema.Void,
    Result: ColumnRow,
    execute: () =>
      sql`SELECT table_name, column_name FROM information_schema.columns
          WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`
  })(undefined).pipe(parseFailureIsDefect)
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

const MigratedRow = Schema.Struct({ migrated: Schema.Boolean })

/** Whether service-auth has ever migrated this database (an export must not create a schema in a stranger's). */
export const isMigrated = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const row = yield* SqlSchema.findOne({
    Request: Schema.String,
    Result: MigratedRow,
    execute: (table) => sql`SELECT to_regclass(${table}) IS NOT NULL AS migrated`
  })(MIGRATIONS_TABLE).pipe(parseFailureIsDefect)
  return Option.exists(row, ({ migrated }) => migrated)
})

const LatestMigrationRow = Schema.Struct({ id: Schema.NullOr(Schema.Number) })

/** The last migration applied: a file records it, and a newer file is refused. */
export const latestMigration = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const row = yield* SqlSchema.findOne({
    Request: Schema.String,
    Result: LatestMigrationRow,
    execute: (table) => sql`SELECT max(migration_id) AS id FROM ${sql(table)}`
  })(MIGRATIONS_TABLE).pipe(parseFailureIsDefect)
  return Option.match(row, { onNone: () => 0, onSome: ({ id }) => id ?? 0 })
})
