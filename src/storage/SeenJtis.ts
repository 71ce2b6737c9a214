/**
 * JWT ids seen once (issue 35): a client assertion's `jti` (RFC 7523 §3) and a DPoP proof's (RFC
 * 9449 §11.1) are accepted only the first time, until they expire. On SQL storage the ids live in
 * `seen_jtis`, where every instance sharing the database sees them: one statement inserts the id and
 * says whether it was new. In memory (no SQL client) they are this process's own. Only accepted JWTs
 * write here, and expired ids are purged by the statement that adds one, now and then.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import type { StorageUnavailable } from "../domain/Errors.js"
import { parseFailureIsDefect } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

export interface SeenJtisShape {
  /**
   * Records `jti` of `scope` (e.g. the client id) as seen until `expiresAtMillis`: true when it was
   * not seen before (or its record had expired), false for a replay.
   */
  readonly claim: (
    scope: string,
    jti: string,
    expiresAtMillis: number,
    nowMillis: number
  ) => Effect.Effect<boolean, StorageUnavailable>
}

const keyOf = (scope: string, jti: string) =>
  createHash("sha256").update(scope).update("\u0000").update(jti).digest("base64url")

/** At most this many ids in memory; beyond it the expired ones go, then the oldest. */
const LOCAL_MAX = 100_000

const makeLocal = (): SeenJtisShape => {
  const seen = new Map<string, number>()
  return {
    claim: (scope, jti, expiresAtMillis, nowMillis) =>
      Effect.sync(() => {
        const key = keyOf(scope, jti)
        const until = seen.get(key)
        if (until !== undefined && until > nowMillis) return false
        if (seen.size >= LOCAL_MAX) {
          for (const [other, otherUntil] of seen) if (otherUntil <= nowMillis) seen.delete(other)
          if (seen.size >= LOCAL_MAX) seen.delete(seen.keys().next().value!)
        }
        seen.delete(key)
        seen.set(key, expiresAtMillis)
        return true
      })
  }
}

const Claim = Schema.Struct({ key: Schema.String, expiresAt: Schema.DateFromSelf, now: Schema.DateFromSelf, purge: Schema.Boolean })
const ClaimedRow = Schema.Struct({ key: Schema.String })

const makeSql = (sql: SqlClient.SqlClient): SeenJtisShape => {
  const insert = SqlSchema.findAll({
    Request: Claim,
    Result: ClaimedRow,
    execute: ({ expiresAt, key, now, purge }) =>
      purge
        ? sql`WITH purged AS (DELETE FROM seen_jtis WHERE expires_at <= ${now})
              INSERT INTO seen_jtis (key, expires_at) VALUES (${key}, ${expiresAt})
              ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE seen_jtis.expires_at <= ${now}
              RETURNING key`
        : sql`INSERT INTO seen_jtis (key, expires_at) VALUES (${key}, ${expiresAt})
              ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE seen_jtis.expires_at <= ${now}
              RETURNING key`
  })
  return {
    claim: (scope, jti, expiresAtMillis, nowMillis) =>
      insert({
        key: keyOf(scope, jti),
        expiresAt: new Date(expiresAtMillis),
        now: new Date(nowMillis),
        // One claim in a hundred also purges what has expired: the table stays small, claims stay one statement.
        purge: Math.random() < 0.01
      }).pipe(Effect.map((rows) => rows.length === 1), parseFailureIsDefect, storageOperation)
  }
}

export class SeenJtis extends Context.Tag("service-auth/SeenJtis")<SeenJtis, SeenJtisShape>() {
  /** This process's own memory. */
  static readonly layerLocal = Layer.sync(SeenJtis, makeLocal)

  /** On the storage's SQL client when it has one (shared by every instance), in memory otherwise. */
  static readonly layer = Layer.effect(
    SeenJtis,
    Effect.map(Effect.serviceOption(SqlClient.SqlClient), Option.match({ onNone: makeLocal, onSome: makeSql }))
  )
}
