/**
 * Where failed client authentications are counted so that every instance sees them. On PostgreSQL
 * the count of a (client id, address) pair lives in `auth_failures`: a failure adds one to the
 * pair's open window (or opens a new one) in one statement and reads back the count, its own rank
 * in the window. The upsert locks the pair's row, so concurrent failures, from any instance, get
 * distinct ranks 1, 2, 3...: the limiter evaluates only those ranked within the limit (exact under
 * READ COMMITTED, no lost update). Only failures write; the success path never reads it (each
 * instance keeps what the writes answered, see `AuthFailureLimiter`). The embedded database has a
 * single process, so there the count is the process's own (`layerLocal`).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

const WindowRow = Schema.Struct({ count: Schema.Int, reset_at: Schema.DateFromSelf })
const Failure = Schema.Struct({ pair: Schema.String, now: Schema.Number, windowMs: Schema.Number })

export interface SharedWindow {
  readonly count: number
  /** When the window closes, in ms since the epoch. */
  readonly resetAt: number
}

export interface FailureCountsShape {
  /** Whether other instances see these counts; if not, the limiter counts in its own map, synchronously. */
  readonly shared: boolean
  /**
   * Adds a failure of `pair` at `now` to its open window, or opens one of `windowMs`, and answers
   * the window as every instance sees it, this failure included: its `count` is the failure's rank.
   * None where counts are this process's alone, or when the database cannot be reached (the caller
   * then counts on its own).
   */
  readonly add: (pair: string, now: number, windowMs: number) => Effect.Effect<Option.Option<SharedWindow>>
}

export class FailureCounts extends Context.Tag("service-auth/FailureCounts")<FailureCounts, FailureCountsShape>() {
  static readonly layerLocal = Layer.succeed(FailureCounts, FailureCounts.of({ shared: false, add: () => Effect.succeedNone }))

  static readonly layerSql = Layer.effect(
    FailureCounts,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const addFailure = SqlSchema.single({
        Request: Failure,
        Result: WindowRow,
        execute: ({ now, pair, windowMs }) => {
          const at = new Date(now)
          // Windows closed an hour ago are purged by the same statement (failures are rare).
          const cutoff = new Date(now - 3_600_000)
          return sql`
            WITH purged AS (DELETE FROM auth_failures WHERE reset_at < ${cutoff})
            INSERT INTO auth_failures (pair, count, reset_at)
            VALUES (${pair}, 1, ${new Date(now + windowMs)})
            ON CONFLICT (pair) DO UPDATE SET
              count = CASE WHEN auth_failures.reset_at <= ${at} THEN 1 ELSE auth_failures.count + 1 END,
              reset_at = CASE WHEN auth_failures.reset_at <= ${at} THEN excluded.reset_at ELSE auth_failures.reset_at END
            RETURNING count, reset_at`
        }
      })
      return FailureCounts.of({
        shared: true,
        add: (pair, now, windowMs) =>
          addFailure({ pair, now, windowMs }).pipe(
            Effect.map((row) => Option.some({ count: row.count, resetAt: row.reset_at.getTime() })),
            parseFailureIsDefect,
            storageOperation,
            // Brute-force counting must not turn a failed authentication into a 503: without the
            // database the instance counts on its own until it is back.
            Effect.catchAll(() => Effect.succeedNone)
          )
      })
    })
  )
}
