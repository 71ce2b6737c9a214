/**
 * The audit trail of admin changes (docs/contract.md §3). Events are written by whoever makes the
 * change, in the change's own transaction, so a change that fails or rolls back leaves no event:
 * the catalogue repositories write theirs with each write (`CredentialRepoSql`, and the memory
 * repository in the same synchronous step as its change); other writers (signing-key rotation)
 * call `record` inside their transaction.
 *
 * `layerSql` is the trail on PostgreSQL or the embedded database; the in-memory trail is made with
 * the in-memory repository it shares its log with (`CredentialRepoMemory.makeWithAuditTrail`).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Schema } from "effect"
import { AuditDetails, type AuditEvent, type AuditEventPage, type AuditQuery, encodeCursor } from "../domain/AuditEvents.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { parseFailureIsDefect } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

export interface AuditTrailShape {
  /**
   * Appends events. On SQL it runs on the caller's transaction when called inside one
   * (`sql.withTransaction`), so the events commit or roll back with the change they record.
   */
  readonly record: (events: ReadonlyArray<AuditEvent>) => Effect.Effect<void, StorageUnavailable>
  /** Newest first; `next` is the cursor of the following page, null at the end. */
  readonly list: (query: AuditQuery) => Effect.Effect<AuditEventPage, StorageUnavailable>
}

export class AuditTrail extends Context.Tag("service-auth/AuditTrail")<AuditTrail, AuditTrailShape>() {}

/** The INSERT of `events` on `sql`: for repositories that write them inside their own transaction. */
export const insertAuditEvents = (sql: SqlClient.SqlClient) => (events: ReadonlyArray<AuditEvent>): Effect.Effect<void, SqlError> =>
  events.length === 0 ? Effect.void : Effect.asVoid(
    sql`INSERT INTO audit_events ${
      sql.insert(events.map((event) => ({
        time: event.time,
        actor: event.actor,
        source: event.source,
        action: event.action,
        profile: event.profile,
        environment: event.environment,
        service_uuid: event.service_uuid,
        client_id: event.client_id,
        details: event.details === null ? null : JSON.stringify(event.details)
      })))
    }`
  )

/** Answers a page from events read newest first, one more than asked for (which tells whether there is a next page). */
export const pageOf = (rows: ReadonlyArray<AuditEvent & { readonly id: string }>, limit: number): AuditEventPage => {
  const page = rows.slice(0, limit)
  return {
    events: page.map(({ id: _id, ...event }) => event),
    next: rows.length > limit ? encodeCursor(page[page.length - 1]!.id) : null
  }
}

const EventRow = Schema.Struct({
  id: Schema.String,
  time: Schema.DateFromSelf,
  actor: Schema.String,
  source: Schema.String,
  action: Schema.String,
  profile: Schema.NullOr(Schema.String),
  environment: Schema.NullOr(Schema.String),
  service_uuid: Schema.NullOr(Schema.String),
  client_id: Schema.NullOr(Schema.String),
  details: Schema.NullOr(AuditDetails)
})

/** One page's query: the profile's events or all, older than `after`, one more than the page to know if there is a next. */
const PageQuery = Schema.Struct({
  profile: Schema.optional(Schema.String),
  profiles: Schema.optional(Schema.Array(Schema.String)),
  after: Schema.optional(Schema.String),
  limit: Schema.Int
})

export const layerSql = Layer.effect(
  AuditTrail,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const insert = insertAuditEvents(sql)
    const findPage = SqlSchema.findAll({
      Request: PageQuery,
      Result: EventRow,
      execute: (query) =>
        sql`
          SELECT id::text AS id, time, actor, source, action, profile, environment, service_uuid, client_id, details
          FROM audit_events
          WHERE ${query.profile === undefined ? sql`TRUE` : sql`profile = ${query.profile}`}
            AND ${query.profiles === undefined ? sql`TRUE` : sql`profile IN ${sql.in(query.profiles)}`}
            AND ${query.after === undefined ? sql`TRUE` : sql`id < ${query.after}::bigint`}
          ORDER BY audit_events.id DESC -- the column, not the text alias (which would sort "9" after "10")
          LIMIT ${query.limit + 1}`
    })
    return AuditTrail.of({
      record: (events) => storageOperation(insert(events)),
      list: (query) =>
        findPage(query).pipe(
          // Actions are written only from the action union; one read back is what was written.
          Effect.map((rows) => pageOf(rows as ReadonlyArray<AuditEvent & { readonly id: string }>, query.limit)),
          parseFailureIsDefect,
          storageOperation
        )
    })
  })
)

/** An in-memory log: appended in the same synchronous step as the change it records. */
export const makeMemoryLog = () => {
  const events: Array<AuditEvent & { readonly id: string }> = []
  let sequence = 0
  const append = (recorded: ReadonlyArray<AuditEvent>): void => {
    for (const event of recorded) events.push({ ...event, id: String(++sequence) })
  }
  const trail = AuditTrail.of({
    record: (recorded) => Effect.sync(() => append(recorded)),
    list: (query) =>
      Effect.sync(() => {
        const rows: Array<AuditEvent & { readonly id: string }> = []
        for (let i = events.length - 1; i >= 0 && rows.length <= query.limit; i--) {
          const event = events[i]!
          if (query.after !== undefined && BigInt(event.id) >= BigInt(query.after)) continue
          if (query.profile !== undefined && event.profile !== query.profile) continue
          if (query.profiles !== undefined && (event.profile === null || !query.profiles.includes(event.profile))) continue
          rows.push(event)
        }
        return pageOf(rows, query.limit)
      })
  })
  return { append, trail }
}
