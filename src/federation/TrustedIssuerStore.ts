/**
 * The trusted issuers (migration 0013), each with its audit event in the same transaction. Nothing
 * here caches the issuers themselves: the token endpoint reads a federated credential's issuer on
 * each federated request (one lookup by primary key), so a change made on one instance is seen by
 * every instance from its next request on, without an announcement. Only the issuers' keys are kept
 * in memory (`IssuerKeys`), under the issuer's URL and settings, so a changed issuer uses new keys.
 *
 * `layerSql` serves PostgreSQL and the embedded database; `layerMemory` records its events in the
 * in-memory audit trail of the memory catalogue.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { AuditEvent } from "../domain/AuditEvents.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { type TrustedIssuer, TrustedIssuerSettings } from "../domain/TrustedIssuers.js"
import { AuditTrail, insertAuditEvents } from "../storage/AuditTrail.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

const IssuerRow = Schema.Struct({
  name: Schema.String,
  issuer: Schema.String,
  settings: Schema.Union(TrustedIssuerSettings, Schema.parseJson(TrustedIssuerSettings)),
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf
})

const fromRow = ({ settings, ...row }: typeof IssuerRow.Type): TrustedIssuer => ({ ...row, ...settings })

const settingsOf = (issuer: TrustedIssuer): TrustedIssuerSettings => ({
  jwks: issuer.jwks,
  audience: issuer.audience,
  algorithms: issuer.algorithms,
  max_token_lifetime_seconds: issuer.max_token_lifetime_seconds,
  profiles: issuer.profiles,
  allow_insecure_loopback: issuer.allow_insecure_loopback
})

export interface TrustedIssuerStoreShape {
  readonly find: (name: string) => Effect.Effect<Option.Option<TrustedIssuer>, StorageUnavailable>
  /** Every issuer, by name. */
  readonly list: Effect.Effect<ReadonlyArray<TrustedIssuer>, StorageUnavailable>
  /**
   * Stores the issuer (created, or replacing the one of its name, whose `created_at` it keeps) with
   * the event made from what was there before; answers what was there before.
   */
  readonly put: (
    issuer: TrustedIssuer,
    eventOf: (previous: Option.Option<TrustedIssuer>) => AuditEvent
  ) => Effect.Effect<Option.Option<TrustedIssuer>, StorageUnavailable>
  /** Deletes the issuer with its event; false when there is none of that name. */
  readonly remove: (name: string, eventOf: (issuer: TrustedIssuer) => AuditEvent) => Effect.Effect<boolean, StorageUnavailable>
}

export class TrustedIssuerStore extends Context.Tag("service-auth/TrustedIssuerStore")<TrustedIssuerStore, TrustedIssuerStoreShape>() {
  static readonly layerSql = Layer.effect(
    TrustedIssuerStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insertEvents = insertAuditEvents(sql)
      const columns = sql`name, issuer, settings, created_at, updated_at`
      const findOne = SqlSchema.findOne({
        Request: Schema.String,
        Result: IssuerRow,
        execute: (name) => sql`SELECT ${columns} FROM trusted_issuers WHERE name = ${name}`
      })
      const findForUpdate = SqlSchema.findOne({
        Request: Schema.String,
        Result: IssuerRow,
        execute: (name) => sql`SELECT ${columns} FROM trusted_issuers WHERE name = ${name} FOR UPDATE`
      })
      const findAll = SqlSchema.findAll({
        Request: Schema.Void,
        Result: IssuerRow,
        execute: () => sql`SELECT ${columns} FROM trusted_issuers ORDER BY name`
      })
      const remove = SqlSchema.findAll({
        Request: Schema.String,
        Result: IssuerRow,
        execute: (name) => sql`DELETE FROM trusted_issuers WHERE name = ${name} RETURNING ${columns}`
      })
      return TrustedIssuerStore.of({
        find: (name) => storageOperation(parseFailureIsDefect(Effect.map(findOne(name), Option.map(fromRow)))),
        list: storageOperation(parseFailureIsDefect(Effect.map(findAll(), (rows) => rows.map(fromRow)))),
        put: (issuer, eventOf) =>
          Effect.gen(function*() {
            const previous = Option.map(yield* parseFailureIsDefect(findForUpdate(issuer.name)), fromRow)
            const settings = JSON.stringify(settingsOf(issuer))
            yield* sql`INSERT INTO trusted_issuers (name, issuer, settings, created_at, updated_at)
                       VALUES (${issuer.name}, ${issuer.issuer}, ${settings}::jsonb, ${issuer.created_at}, ${issuer.updated_at})
                       ON CONFLICT (name) DO UPDATE SET issuer = EXCLUDED.issuer, settings = EXCLUDED.settings,
                         updated_at = EXCLUDED.updated_at`
            yield* insertEvents([eventOf(previous)])
            return previous
          }).pipe(sql.withTransaction, storageOperation),
        remove: (name, eventOf) =>
          Effect.gen(function*() {
            const removed = yield* parseFailureIsDefect(remove(name))
            if (removed.length === 0) return false
            yield* insertEvents(removed.map((row) => eventOf(fromRow(row))))
            return true
          }).pipe(sql.withTransaction, storageOperation)
      })
    })
  )

  /** Each operation is one synchronous step with its event, like a transaction. */
  static readonly layerMemory = Layer.effect(
    TrustedIssuerStore,
    Effect.gen(function*() {
      const trail = yield* AuditTrail
      const issuers = new Map<string, TrustedIssuer>()
      return TrustedIssuerStore.of({
        find: (name) => Effect.sync(() => Option.fromNullable(issuers.get(name))),
        list: Effect.sync(() => [...issuers.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))),
        put: (issuer, eventOf) =>
          Effect.suspend(() => {
            const previous = Option.fromNullable(issuers.get(issuer.name))
            const created_at = Option.match(previous, { onNone: () => issuer.created_at, onSome: (old) => old.created_at })
            issuers.set(issuer.name, { ...issuer, created_at })
            return Effect.as(trail.record([eventOf(previous)]), previous)
          }),
        remove: (name, eventOf) =>
          Effect.suspend(() => {
            const issuer = issuers.get(name)
            if (issuer === undefined) return Effect.succeed(false)
            issuers.delete(name)
            return Effect.as(trail.record([eventOf(issuer)]), true)
          })
      })
    })
  )
}
