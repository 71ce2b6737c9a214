/**
 * The catalogue's writes on SQL (`CatalogueWrites`): PostgreSQL or embedded PGlite, the same
 * statements. Each runs in one transaction opened by `catalogueWriteWith`, records its audit events
 * in it, and announces what it changed to every instance when it commits.
 *
 * The two-credential limit holds under concurrency because a save first locks the rows of the
 * services it touches (`FOR UPDATE`, in a fixed order so two saves never deadlock), then reads their
 * live credentials, checks, and writes, all in one transaction. A revocation is a write of the
 * token's service, so that the coherence protocol carries it to every instance's cache exactly as it
 * carries a credential's deletion (docs/cache-coherence.md). Expiry itself needs no write: only its
 * audit event is written, once: the sweep's UPDATE takes each row only while `expiry_recorded` is
 * false, so of two instances sweeping at once, the second finds nothing left to record.
 */
import { type SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Either, Option, Schema } from "effect"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, NotFound } from "../domain/Errors.js"
import type { EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { announcedScopes, type CatalogueScope, writeScopes } from "./CatalogueScope.js"
import {
  credentialEvents,
  deletionEvents,
  expiryEvents,
  insertAuditEvents,
  introspectionEvent,
  profileEvent,
  revocationEvent,
  serviceEvent
} from "../storage/AuditTrail.js"
import { credentialStatements } from "./CatalogueStatements.js"
import { type CatalogueStoreWrites, checkCredentialChanges, introspectProfilesOf, serviceKey } from "./CatalogueWrites.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

/** The channel on which committed catalogue changes are announced, with the new version. */
export const CATALOGUE_CHANNEL = "service_auth_cache"
/**
 * Where a write says what it changed, just before its version is announced (one transaction's
 * notifications arrive in the order they were sent): the version, a space, the scopes as JSON.
 */
export const SCOPES_CHANNEL = "service_auth_cache_scopes"

/**
 * The first statement of every write to the catalogue (docs/cache-coherence.md): counts the change
 * and notifies listening instances of the new version when the transaction commits. Its row lock,
 * held to the commit, serialises catalogue writes (rare: admin changes, an import), so they never
 * deadlock one another, and orders them against instances renewing their cache leases.
 * `scopes` says what the write may change (`writeScopes`), so that instances evict only that;
 * without, the announcement says "anything", and every instance empties its cache.
 */
export const catalogueWriteWith =
  (sql: SqlClient.SqlClient, scopes?: ReadonlyArray<CatalogueScope>) => <A, E, R>(write: Effect.Effect<A, E, R>) =>
    sql`WITH changed AS (UPDATE catalogue_version SET version = version + 1 RETURNING version)
      SELECT ${
      scopes === undefined ? sql`` : sql`pg_notify(${SCOPES_CHANNEL}, version::text || ${announcedScopes(scopes)}),`
    } pg_notify(${CATALOGUE_CHANNEL}, version::text) FROM changed`.pipe(
      Effect.zipRight(write),
      sql.withTransaction
    )

const ExpiredRow = Schema.Struct({
  profile: Schema.String,
  environment: Schema.String,
  service_uuid: Schema.String,
  client_id: Schema.String,
  expires_at: Schema.DateFromSelf
})
export const makeWritesSql = (sql: SqlClient.SqlClient): CatalogueStoreWrites => {
  const record = insertAuditEvents(sql)
  const catalogueWrite = (scopes: ReadonlyArray<CatalogueScope>) => catalogueWriteWith(sql, scopes)
  const { liveClientIds, tombstone } = credentialStatements(sql)
  const due = SqlSchema.findAll({
    Request: Schema.DateFromSelf,
    Result: ExpiredRow,
    execute: (now) =>
      sql`UPDATE credentials SET expiry_recorded = true
          WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ${now} AND NOT expiry_recorded
          RETURNING profile, environment, service_uuid, client_id, expires_at`
  })
  /** Tombstones the live credentials under a deleted item; answers them, for the audit trail. */
  const tombstoneCredentials = (now: Date, profile: ProfileId, environment?: EnvironmentName, uuid?: ServiceUuid) =>
    tombstone({
      now,
      profile,
      ...(environment === undefined ? {} : { environment }),
      ...(uuid === undefined ? {} : { uuid })
    }).pipe(
      parseFailureIsDefect,
      Effect.map((rows) => [...rows].sort((a, b) => (a.client_id < b.client_id ? -1 : 1)))
    )

  return {
    putProfile: (profile, now, actor, lifetimeDays, upstreamOrigins) =>
      Effect.gen(function*() {
        const origins = upstreamOrigins == null ? null : JSON.stringify(upstreamOrigins)
        const inserted = yield* sql`INSERT INTO profiles (profile, created_at, credential_max_lifetime_days, upstream_origins)
          VALUES (${profile}, ${now}, ${lifetimeDays ?? null}, ${origins}::jsonb)
          ON CONFLICT (profile) DO NOTHING RETURNING profile`
        if (inserted.length === 0) {
          const lifetimeChanged = lifetimeDays === undefined ?
            [] :
            yield* sql`UPDATE profiles SET credential_max_lifetime_days = ${lifetimeDays}
            WHERE profile = ${profile} AND credential_max_lifetime_days IS DISTINCT FROM ${lifetimeDays} RETURNING profile`
          // jsonb compares by value: the same origins in the same order change nothing.
          const originsChanged = upstreamOrigins === undefined ? [] : yield* sql`UPDATE profiles SET upstream_origins = ${origins}::jsonb
            WHERE profile = ${profile} AND upstream_origins IS DISTINCT FROM ${origins}::jsonb RETURNING profile`
          if (lifetimeChanged.length > 0 || originsChanged.length > 0) {
            yield* record([profileEvent(
              actor,
              now,
              "profile.changed",
              profile,
              lifetimeChanged.length > 0 ? lifetimeDays : undefined,
              originsChanged.length > 0 ? upstreamOrigins : undefined
            )])
          }
          return false
        }
        yield* record([profileEvent(actor, now, "profile.created", profile, lifetimeDays, upstreamOrigins)])
        return true
      }).pipe(catalogueWrite(writeScopes.profilePolicy(profile, upstreamOrigins)), storageOperation),

    // Each delete first locks what a concurrent save locks (the profile, or the services), so a
    // credential added concurrently is either committed before the tombstones are written, or its
    // save waits and then finds its service gone. Never a live credential left behind.
    deleteProfile: (profile, now, actor) =>
      Effect.gen(function*() {
        yield* sql`SELECT 1 AS found FROM profiles WHERE profile = ${profile} FOR UPDATE`
        const removed = yield* tombstoneCredentials(now, profile)
        const deleted = yield* sql`DELETE FROM profiles WHERE profile = ${profile} RETURNING profile`
        if (deleted.length === 0) return false
        yield* record(deletionEvents(actor, now, { action: "profile.deleted", profile }, removed))
        return true
      }).pipe(catalogueWrite(writeScopes.profile(profile)), storageOperation),

    putEnvironment: (profile, environment, now, actor) =>
      Effect.gen(function*() {
        const inserted = yield* sql`
          INSERT INTO environments (profile, name, created_at)
          SELECT ${profile}, ${environment}, ${now} WHERE EXISTS (SELECT 1 FROM profiles WHERE profile = ${profile})
          ON CONFLICT (profile, name) DO NOTHING RETURNING name`
        if (inserted.length > 0) {
          yield* record([auditEvent(actor, now, { action: "environment.created", profile, environment })])
          return true
        }
        const [exists] = yield* sql`SELECT 1 AS found FROM environments WHERE profile = ${profile} AND name = ${environment}`
        if (exists === undefined) return yield* new NotFound({ description: "Profile not found" })
        return false
      }).pipe(catalogueWrite(writeScopes.created()), storageOperation),

    deleteEnvironment: (profile, environment, now, actor) =>
      Effect.gen(function*() {
        yield* sql`SELECT uuid FROM services WHERE profile = ${profile} AND environment = ${environment}
                   ORDER BY uuid FOR UPDATE`
        const removed = yield* tombstoneCredentials(now, profile, environment)
        const deleted = yield* sql`
          DELETE FROM environments WHERE profile = ${profile} AND name = ${environment} RETURNING name`
        if (deleted.length === 0) return false
        yield* record(deletionEvents(actor, now, { action: "environment.deleted", profile, environment }, removed))
        return true
      }).pipe(catalogueWrite(writeScopes.environment(profile, environment)), storageOperation),

    putService: (address, fields, mode, now, actor) =>
      Effect.gen(function*() {
        const [environment] = yield* sql`
          SELECT 1 AS found FROM environments WHERE profile = ${address.profile} AND name = ${address.environment}
          FOR SHARE`
        if (environment === undefined) {
          const [profile] = yield* sql`SELECT 1 AS found FROM profiles WHERE profile = ${address.profile}`
          return yield* new NotFound({ description: profile === undefined ? "Profile not found" : "Environment not found" })
        }
        const handler = JSON.stringify(fields.handler)
        const rateLimit = fields.rate_limit == null ? null : JSON.stringify(fields.rate_limit)
        const requireDpop = fields.require_dpop === true
        const approved = fields.upstream_approved === true
        const inserted = yield* sql`
          INSERT INTO services (profile, environment, uuid, name, auth_type, handler, rate_limit, require_dpop, upstream_approved, created_at)
          VALUES (${address.profile}, ${address.environment}, ${address.uuid}, ${fields.name}, ${fields.auth_type},
                  ${handler}::jsonb, ${rateLimit}::jsonb, ${requireDpop}, ${approved}, ${now})
          ON CONFLICT (profile, environment, uuid) DO NOTHING RETURNING uuid`
        if (inserted.length > 0) {
          yield* record([serviceEvent(actor, now, "service.created", address, fields)])
          return true
        }
        if (mode === "create") return yield* new Conflict({ description: "A service with this uuid already exists" })
        // Only a replacement that changes something is a change (jsonb compares by value).
        const updated = yield* sql`
          UPDATE services SET name = ${fields.name}, auth_type = ${fields.auth_type}, handler = ${handler}::jsonb,
                 rate_limit = ${rateLimit}::jsonb, require_dpop = ${requireDpop}, upstream_approved = ${approved}
          WHERE profile = ${address.profile} AND environment = ${address.environment} AND uuid = ${address.uuid}
            AND (name, auth_type, handler, rate_limit, require_dpop, upstream_approved) IS DISTINCT FROM
                (${fields.name}, ${fields.auth_type}, ${handler}::jsonb, ${rateLimit}::jsonb, ${requireDpop}, ${approved})
          RETURNING uuid`
        if (updated.length > 0) yield* record([serviceEvent(actor, now, "service.changed", address, fields)])
        return false
      }).pipe(catalogueWrite(writeScopes.service(address)), storageOperation),

    deleteService: (address, now, actor) =>
      Effect.gen(function*() {
        yield* sql`SELECT 1 AS found FROM services
                   WHERE profile = ${address.profile} AND environment = ${address.environment} AND uuid = ${address.uuid}
                   FOR UPDATE`
        const removed = yield* tombstoneCredentials(now, address.profile, address.environment, address.uuid)
        const deleted = yield* sql`
          DELETE FROM services
          WHERE profile = ${address.profile} AND environment = ${address.environment} AND uuid = ${address.uuid}
          RETURNING uuid`
        if (deleted.length === 0) return false
        const deletion = {
          action: "service.deleted",
          profile: address.profile,
          environment: address.environment,
          service_uuid: address.uuid
        } as const
        yield* record(deletionEvents(actor, now, deletion, removed))
        return true
      }).pipe(catalogueWrite(writeScopes.service(address)), storageOperation),

    applyCredentialChanges: (profile, changes, now, actor, options) =>
      Effect.gen(function*() {
        const [found] = yield* sql`SELECT 1 AS found FROM profiles WHERE profile = ${profile} FOR SHARE`
        if (found === undefined) return yield* new NotFound({ description: "Profile not found" })
        const touched = [...new Map(changes.map((c) => [serviceKey(c.environment, c.service_uuid), c])).values()]
          .sort((a, b) => (serviceKey(a.environment, a.service_uuid) < serviceKey(b.environment, b.service_uuid) ? -1 : 1))
        const snapshot = new Map<string, ReadonlyArray<string> | undefined>()
        for (const { environment, service_uuid: serviceUuid } of touched) {
          const [service] = yield* sql`
            SELECT 1 AS found FROM services
            WHERE profile = ${profile} AND environment = ${environment} AND uuid = ${serviceUuid}
            FOR UPDATE`
          const live = service === undefined
            ? undefined
            : yield* liveClientIds({ profile, environment, uuid: serviceUuid }).pipe(parseFailureIsDefect)
          snapshot.set(serviceKey(environment, serviceUuid), live?.map((row) => row.client_id))
        }
        const checked = checkCredentialChanges(snapshot, changes)
        if (Either.isLeft(checked)) return yield* checked.left
        for (const change of changes) {
          if (change.op === "remove_credential") {
            yield* sql`UPDATE credentials SET deleted_at = ${now} WHERE client_id = ${change.client_id}`
            continue
          }
          yield* sql`
            INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at, expires_at)
            VALUES (${change.client_id}, ${profile}, ${change.environment}, ${change.service_uuid}, ${change.secret_hash},
                    ${now}, ${change.expires_at ?? null})`
          yield* sql`
            UPDATE services SET auth_type = 'oauth'
            WHERE profile = ${profile} AND environment = ${change.environment} AND uuid = ${change.service_uuid}`
        }
        yield* record(credentialEvents(actor, now, profile, changes, options?.save === true))
      }).pipe(catalogueWrite(writeScopes.credentials(profile, changes)), storageOperation),

    revokeToken: (revocation, now, actor) =>
      Effect.gen(function*() {
        // Kept until the token's own expiry: older rows are of tokens refused anyway.
        yield* sql`DELETE FROM revoked_tokens WHERE expires_at <= ${now}`
        const inserted = yield* sql`
          INSERT INTO revoked_tokens (jti, client_id, expires_at)
          VALUES (${revocation.jti}, ${revocation.clientId}, ${revocation.expiresAt})
          ON CONFLICT (jti) DO NOTHING RETURNING jti`
        if (inserted.length === 0) return false
        yield* record([revocationEvent(actor, now, revocation)])
        return true
      }).pipe(catalogueWrite(writeScopes.service(revocation.address)), storageOperation),

    setIntrospectProfiles: (address, clientId, profiles, now, actor) =>
      sql.withTransaction(Effect.gen(function*() {
        const next = introspectProfilesOf(profiles)
        const text = next === null ? null : JSON.stringify(next)
        const live = yield* sql`SELECT client_id FROM credentials
          WHERE client_id = ${clientId} AND profile = ${address.profile} AND environment = ${address.environment}
            AND service_uuid = ${address.uuid} AND deleted_at IS NULL FOR UPDATE`
        if (live.length === 0) return Option.none()
        // jsonb compares by value: the same list changes nothing and records nothing.
        const changed = yield* sql`UPDATE credentials SET introspect_profiles = ${text}::jsonb
          WHERE client_id = ${clientId} AND introspect_profiles IS DISTINCT FROM ${text}::jsonb RETURNING client_id`
        if (changed.length === 0) return Option.some(false)
        yield* record([introspectionEvent(actor, now, address, clientId, next)])
        return Option.some(true)
      })).pipe(storageOperation),

    recordExpiries: (now) =>
      Effect.gen(function*() {
        const expired = yield* due(now).pipe(parseFailureIsDefect)
        yield* record(expiryEvents(now, expired))
        return expired.length
      }).pipe(sql.withTransaction, storageOperation)
  }
}
