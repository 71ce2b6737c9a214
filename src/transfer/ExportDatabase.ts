/** `service-auth export`: every exported table read in one snapshot, checked as an import would. */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either } from "effect"
import { latestMigration, unclassifiedSchema } from "./DatabaseSchema.js"
import { checkKeys } from "./ExportChecks.js"
import { decodeDocument, describeIssue, EXPORT_FORMAT, EXPORT_VERSION } from "./ExportFile.js"
import { TransferRefused } from "./TransferErrors.js"

/** A `timestamptz` column as `StoredTimestamp` text: UTC, to the microsecond. */
const asText = (sql: SqlClient.SqlClient, column: string) =>
  sql.literal(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS ${column}`)

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
    const profiles = yield* sql`SELECT profile, ${
      asText(sql, "created_at")
    }, credential_max_lifetime_days, upstream_origins FROM profiles ORDER BY profile`
    const environments = yield* sql`
      SELECT profile, name, ${asText(sql, "created_at")} FROM environments ORDER BY profile, name`
    const services = yield* sql`
      SELECT profile, environment, uuid, name, auth_type, handler, rate_limit, require_dpop, upstream_approved,
             ${asText(sql, "created_at")}
      FROM services ORDER BY position`
    const credentials = yield* sql`
      SELECT client_id, profile, environment, service_uuid, secret_hash, ${asText(sql, "created_at")},
             ${asText(sql, "last_used_at")}, ${asText(sql, "deleted_at")}, ${asText(sql, "expires_at")}, expiry_recorded,
             introspect_profiles
      FROM credentials ORDER BY position`
    const serverKeys = yield* sql`SELECT name, value, ${asText(sql, "created_at")} FROM server_keys ORDER BY name`
    const signingKeys = yield* sql`
      SELECT kid, public_jwk, private_key, ${asText(sql, "created_at")}, ${asText(sql, "active_from")}
      FROM signing_keys ORDER BY position`
    const auditEvents = yield* sql`
      SELECT ${asText(sql, "time")}, actor, source, action, profile, environment, service_uuid, client_id, details
      FROM audit_events ORDER BY id`
    const trustedIssuers = yield* sql`
      SELECT name, issuer, settings, ${asText(sql, "created_at")}, ${asText(sql, "updated_at")}
      FROM trusted_issuers ORDER BY name`
    return {
      profiles,
      environments,
      services,
      credentials,
      server_keys: serverKeys,
      signing_keys: signingKeys,
      audit_events: auditEvents,
      trusted_issuers: trustedIssuers
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
