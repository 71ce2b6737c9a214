/**
 * The admin tokens managed at run time (migration 0006): name, role, profiles, and the token's
 * digest only. Creating and revoking write their audit event in the same transaction. Nothing here
 * caches: `AdminAccess` reads the token presented on each admin request (one indexed lookup), so a
 * revocation is refused by every instance from its next request on. Introspection keeps the callers
 * it resolved for as long as the catalogue cache's generation: a revocation is announced as a
 * catalogue change of anything, so every instance drops them before it is answered.
 *
 * `layerSql` serves PostgreSQL and the embedded database; `layerMemory` records its events in the
 * in-memory audit trail it is given (that of `CredentialRepoMemory.makeWithAuditTrail`).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { AdminRole } from "../domain/AdminRoles.js"
import type { AuditEvent } from "../domain/AuditEvents.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { AuditTrail, insertAuditEvents } from "../storage/AuditTrail.js"
import { catalogueWriteWith } from "../catalogue/CatalogueWritesSql.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

/** The digest of an admin token: hex SHA-256 (`TokenDigest`), never the token. */
export const StoredAdminToken = Schema.Struct({
  name: Schema.String,
  role: AdminRole,
  profiles: Schema.NullOr(Schema.Array(Schema.String)),
  digest: Schema.String,
  created_at: Schema.DateFromSelf,
  last_used_at: Schema.NullOr(Schema.DateFromSelf)
})
export type StoredAdminToken = typeof StoredAdminToken.Type

/** A token to store: it has not been used yet. */
export type NewAdminToken = Omit<StoredAdminToken, "last_used_at">

/** `last_used_at` is written at most this often for a token (as for credentials). */
export const LAST_USED_EVERY_MS = 60_000

export interface AdminTokenStoreShape {
  /** The token whose digest this is, if stored. */
  readonly findByDigest: (digest: string) => Effect.Effect<Option.Option<StoredAdminToken>, StorageUnavailable>
  /** Every stored token, by name. */
  readonly list: Effect.Effect<ReadonlyArray<StoredAdminToken>, StorageUnavailable>
  /** Stores the token with its audit event; false (nothing written) when the name is taken. */
  readonly create: (token: NewAdminToken, event: AuditEvent) => Effect.Effect<boolean, StorageUnavailable>
  /** Deletes the token with the event made from it; false when there is none of that name. */
  readonly revoke: (
    name: string,
    eventOf: (token: StoredAdminToken) => AuditEvent
  ) => Effect.Effect<boolean, StorageUnavailable>
  /** Records a use at `at`, unless one was recorded less than a minute before. */
  readonly markUsed: (name: string, at: Date) => Effect.Effect<void, StorageUnavailable>
}

export class AdminTokenStore extends Context.Tag("service-auth/AdminTokenStore")<AdminTokenStore, AdminTokenStoreShape>() {
  static readonly layerSql = Layer.effect(
    AdminTokenStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insertEvents = insertAuditEvents(sql)
      const columns = sql`name, role, profiles, digest, created_at, last_used_at`
      const findByDigest = SqlSchema.findOne({
        Request: Schema.String,
        Result: StoredAdminToken,
        execute: (digest) => sql`SELECT ${columns} FROM admin_tokens WHERE digest = ${digest}`
      })
      const findAll = SqlSchema.findAll({
        Request: Schema.Void,
        Result: StoredAdminToken,
        execute: () => sql`SELECT ${columns} FROM admin_tokens ORDER BY name`
      })
      const insert = SqlSchema.findAll({
        Request: Schema.typeSchema(StoredAdminToken.pipe(Schema.omit("last_used_at"))),
        Result: Schema.Struct({ name: Schema.String }),
        execute: (token) =>
          sql`INSERT INTO admin_tokens (name, role, profiles, digest, created_at)
              VALUES (${token.name}, ${token.role}, ${token.profiles === null ? null : JSON.stringify(token.profiles)}::jsonb,
                      ${token.digest}, ${token.created_at})
              ON CONFLICT DO NOTHING
              RETURNING name`
      })
      const remove = SqlSchema.findAll({
        Request: Schema.String,
        Result: StoredAdminToken,
        execute: (name) => sql`DELETE FROM admin_tokens WHERE name = ${name} RETURNING ${columns}`
      })
      return AdminTokenStore.of({
        findByDigest: (digest) => storageOperation(parseFailureIsDefect(findByDigest(digest))),
        list: storageOperation(parseFailureIsDefect(findAll())),
        create: (token, event) =>
          Effect.gen(function*() {
            const inserted = yield* parseFailureIsDefect(insert(token))
            if (inserted.length === 0) return false
            yield* insertEvents([event])
            return true
          }).pipe(sql.withTransaction, storageOperation),
        revoke: (name, eventOf) =>
          Effect.gen(function*() {
            const removed = yield* parseFailureIsDefect(remove(name))
            if (removed.length === 0) return false
            yield* insertEvents(removed.map(eventOf))
            return true
            // Announced as a change of anything: every instance drops its cache, and with it the
            // introspection's cached callers (`CatalogueWrites.dropCached` waits for them).
          }).pipe(catalogueWriteWith(sql), storageOperation),
        markUsed: (name, at) =>
          storageOperation(Effect.asVoid(
            sql`UPDATE admin_tokens SET last_used_at = ${at}
                WHERE name = ${name}
                  AND (last_used_at IS NULL OR last_used_at <= ${new Date(at.getTime() - LAST_USED_EVERY_MS)})`
          ))
      })
    })
  )

  /** Each operation is one synchronous step with its event, like a transaction. */
  static readonly layerMemory = Layer.effect(
    AdminTokenStore,
    Effect.gen(function*() {
      const trail = yield* AuditTrail
      const tokens = new Map<string, StoredAdminToken>()
      return AdminTokenStore.of({
        findByDigest: (digest) => Effect.sync(() => Option.fromNullable([...tokens.values()].find((token) => token.digest === digest))),
        list: Effect.sync(() => [...tokens.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))),
        create: (token, event) =>
          Effect.suspend(() => {
            if (tokens.has(token.name) || [...tokens.values()].some((t) => t.digest === token.digest)) {
              return Effect.succeed(false)
            }
            tokens.set(token.name, { ...token, last_used_at: null })
            return Effect.as(trail.record([event]), true)
          }),
        revoke: (name, eventOf) =>
          Effect.suspend(() => {
            const token = tokens.get(name)
            if (token === undefined) return Effect.succeed(false)
            tokens.delete(name)
            return Effect.as(trail.record([eventOf(token)]), true)
          }),
        markUsed: (name, at) =>
          Effect.sync(() => {
            const token = tokens.get(name)
            if (token === undefined) return
            if (token.last_used_at !== null && at.getTime() - token.last_used_at.getTime() < LAST_USED_EVERY_MS) return
            tokens.set(name, { ...token, last_used_at: at })
          })
      })
    })
  )
}
