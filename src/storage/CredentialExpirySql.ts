/**
 * What `CredentialRepoSql` knows of expiry and of a profile's credential policy, apart
 * so that the repository stays readable. Expiry itself needs no write: every decision compares a
 * credential's `expires_at` with its clock. Only the audit event is written, once: the sweep's
 * UPDATE takes each row only while `expiry_recorded` is false, so of two instances sweeping at
 * once, the second waits on the first's row locks, then finds nothing left to record.
 */
import { type SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { ProfileId } from "../domain/Identifiers.js"
import { insertAuditEvents } from "./AuditTrail.js"
import { expiryEvents } from "./CatalogueEvents.js"
import type { CredentialRepoShape } from "./CredentialRepo.js"
import { parseFailureIsDefect } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

const DAY_MS = 86_400_000

const ExpiringRow = Schema.Struct({ within7d: Schema.Number, within30d: Schema.Number })
const ExpiredRow = Schema.Struct({
  profile: Schema.String,
  environment: Schema.String,
  service_uuid: Schema.String,
  client_id: Schema.String,
  expires_at: Schema.DateFromSelf
})
const LifetimeRow = Schema.Struct({ credential_max_lifetime_days: Schema.NullOr(Schema.Number) })

export const expiryOperations = (
  sql: SqlClient.SqlClient
): Pick<CredentialRepoShape, "countExpiring" | "recordExpiries" | "credentialLifetime"> => {
  const record = insertAuditEvents(sql)
  const expiring = SqlSchema.single({
    Request: Schema.Struct({ now: Schema.DateFromSelf, week: Schema.DateFromSelf, month: Schema.DateFromSelf }),
    Result: ExpiringRow,
    execute: ({ month, now, week }) =>
      sql`SELECT
        count(*) FILTER (WHERE expires_at <= ${week})::int AS "within7d",
        count(*)::int AS "within30d"
        FROM credentials
        WHERE deleted_at IS NULL AND expires_at > ${now} AND expires_at <= ${month}`
  })
  const due = SqlSchema.findAll({
    Request: Schema.DateFromSelf,
    Result: ExpiredRow,
    execute: (now) =>
      sql`UPDATE credentials SET expiry_recorded = true
          WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ${now} AND NOT expiry_recorded
          RETURNING profile, environment, service_uuid, client_id, expires_at`
  })
  const lifetime = SqlSchema.findOne({
    Request: Schema.String,
    Result: LifetimeRow,
    execute: (profile) => sql`SELECT credential_max_lifetime_days FROM profiles WHERE profile = ${profile}`
  })
  return {
    countExpiring: (now) =>
      expiring({ now, week: new Date(now.getTime() + 7 * DAY_MS), month: new Date(now.getTime() + 30 * DAY_MS) }).pipe(
        parseFailureIsDefect,
        Effect.catchTag("NoSuchElementException", Effect.die),
        storageOperation
      ),
    recordExpiries: (now) =>
      Effect.gen(function*() {
        const expired = yield* due(now).pipe(parseFailureIsDefect)
        yield* record(expiryEvents(now, expired))
        return expired.length
      }).pipe(sql.withTransaction, storageOperation),
    credentialLifetime: (profile: ProfileId) =>
      lifetime(profile).pipe(
        parseFailureIsDefect,
        Effect.map(Option.map((row) => row.credential_max_lifetime_days)),
        storageOperation
      )
  }
}
