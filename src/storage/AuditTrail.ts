/**
 * The audit trail of admin changes (docs/contract.md §3). Events are written by whoever makes the
 * change, in the change's own transaction, so a change that fails or rolls back leaves no event:
 * the catalogue stores write theirs with each write (`CatalogueSql`, and the memory store in the
 * same synchronous step as its change); other writers (signing-key rotation) call `record` inside
 * their transaction. The events of the catalogue's writes are built here once for both stores,
 * from what the write actually did.
 *
 * `layerSql` is the trail on PostgreSQL or the embedded database; the in-memory trail is made with
 * the in-memory catalogue it shares its log with (`CatalogueInMemory.make`).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Schema } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { CREDENTIAL_EXPIRY_ACTOR_NAME } from "../domain/AdminRoles.js"
import {
  AuditAction,
  AuditDetails,
  type AuditEvent,
  type AuditEventPage,
  auditEvent,
  type AuditQuery,
  encodeCursor
} from "../domain/AuditEvents.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { ServiceFields, StoredChange, TokenRevocation } from "../catalogue/CatalogueWrites.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { parseFailureIsDefect, storageOperation } from "./StorageErrors.js"

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
  // Written only from the action union (an import checks it too): read back as it.
  action: AuditAction,
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
          Effect.map((rows) => pageOf(rows, query.limit)),
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

/** A live credential a deletion tombstoned. */
export interface RemovedCredential {
  readonly environment: string
  readonly service_uuid: string
  readonly client_id: string
}

/**
 * A deletion: one `credential.removed` per live credential it took with it (older events first, so
 * that the deletion itself is on top of the trail, newest first), then the deletion.
 */
export const deletionEvents = (
  actor: AdminActorShape,
  now: Date,
  deletion: { readonly action: AuditAction; readonly profile: string; readonly environment?: string; readonly service_uuid?: string },
  removed: ReadonlyArray<RemovedCredential>
): Array<AuditEvent> => [
  ...removed.map((credential) =>
    auditEvent(actor, now, {
      action: "credential.removed",
      profile: deletion.profile,
      ...credential,
      details: { cause: deletion.action }
    })
  ),
  auditEvent(actor, now, deletion)
]

/** A service created or changed: its name, auth_type and handler type (never a proxy URL). */
export const serviceEvent = (
  actor: AdminActorShape,
  now: Date,
  action: "service.created" | "service.changed",
  address: ServiceAddress,
  fields: ServiceFields
): AuditEvent =>
  auditEvent(actor, now, {
    action,
    profile: address.profile,
    environment: address.environment,
    service_uuid: address.uuid,
    details: {
      name: fields.name,
      auth_type: fields.auth_type,
      handler: fields.handler.type,
      // Only when set, so that the events of services without one are as they always were.
      ...(fields.rate_limit == null ? {} : { rate_limit: `${fields.rate_limit.requests}/${fields.rate_limit.per_seconds}s` }),
      ...(fields.require_dpop === true ? { require_dpop: true } : {})
    }
  })

/**
 * A profile created (`profile.created`), or its policies changed (`profile.changed`):
 * `credential_max_lifetime_days` in the details when set, `upstream_origins` when set or changed
 * (`[]` when removed).
 */
export const profileEvent = (
  actor: AdminActorShape,
  now: Date,
  action: "profile.created" | "profile.changed",
  profile: string,
  lifetimeDays: number | null | undefined,
  upstreamOrigins?: ReadonlyArray<string> | null
): AuditEvent => {
  const details = {
    ...(lifetimeDays == null ? {} : { credential_max_lifetime_days: lifetimeDays }),
    ...(upstreamOrigins === undefined || (action === "profile.created" && upstreamOrigins === null)
      ? {}
      : { upstream_origins: upstreamOrigins ?? [] })
  }
  return auditEvent(actor, now, { action, profile, ...(Object.keys(details).length === 0 ? {} : { details }) })
}

/** Credential changes, one event each, then the `save` that made them when it was one. */
export const credentialEvents = (
  actor: AdminActorShape,
  now: Date,
  profile: string,
  changes: ReadonlyArray<StoredChange>,
  save: boolean
): Array<AuditEvent> => {
  const events = changes.map((change) =>
    auditEvent(actor, now, {
      action: change.op === "add_credential" ? "credential.added" : "credential.removed",
      profile,
      environment: change.environment,
      service_uuid: change.service_uuid,
      client_id: change.client_id
    })
  )
  if (!save) return events
  const added = changes.filter((change) => change.op === "add_credential").length
  return [
    ...events,
    auditEvent(actor, now, { action: "profile.saved", profile, details: { added, removed: changes.length - added } })
  ]
}

/** A token revoked by its client: the actor is the client id; the token is named by its `jti` only. */
export const revocationEvent = (actor: AdminActorShape, now: Date, revocation: TokenRevocation): AuditEvent =>
  auditEvent(actor, now, {
    action: "token.revoked",
    profile: revocation.address.profile,
    environment: revocation.address.environment,
    service_uuid: revocation.address.uuid,
    client_id: revocation.clientId,
    details: { jti: revocation.jti }
  })

/** Who records a credential's expiry: the server itself, not an admin. */
export const EXPIRY_ACTOR: AdminActorShape = { name: CREDENTIAL_EXPIRY_ACTOR_NAME, source: "server" }

/** A credential that reached its `expires_at`. */
export interface ExpiredCredential extends RemovedCredential {
  readonly profile: string
  readonly expires_at: Date
}

/** One `credential.expired` per credential, in client id order. */
export const expiryEvents = (now: Date, expired: ReadonlyArray<ExpiredCredential>): Array<AuditEvent> =>
  [...expired].sort((a, b) => (a.client_id < b.client_id ? -1 : 1)).map((credential) =>
    auditEvent(EXPIRY_ACTOR, now, {
      action: "credential.expired",
      profile: credential.profile,
      environment: credential.environment,
      service_uuid: credential.service_uuid,
      client_id: credential.client_id,
      details: { expires_at: credential.expires_at.toISOString() }
    })
  )

/** `credential.changed`, details `introspect_profiles` (the new list; empty: none). */
export const introspectionEvent = (
  actor: AdminActorShape,
  now: Date,
  address: ServiceAddress,
  clientId: ClientId,
  profiles: ReadonlyArray<ProfileId> | null
): AuditEvent =>
  auditEvent(actor, now, {
    action: "credential.changed",
    profile: address.profile,
    environment: address.environment,
    service_uuid: address.uuid,
    client_id: clientId,
    details: { introspect_profiles: [...(profiles ?? [])] }
  })
