/** Waiting, after a catalogue write outside a server (an import), for the running instances' caches. */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { LEASE_MS } from "./CacheLease.js"
import { parseFailureIsDefect } from "../storage/StorageErrors.js"

const BehindRow = Schema.Struct({ behind: Schema.Number })

/**
 * After the import committed, as after an admin change: returns once every running instance's cache
 * lease has acknowledged `version` (so a credential the merge deleted is refused everywhere from
 * then on), or once a lease's length has passed (every lease renewed before the commit has then run
 * out). Without running instances (the embedded database, a stopped deployment), at once.
 */
export const awaitCacheAcknowledgement = (version: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const behindCount = SqlSchema.single({
      Request: Schema.String,
      Result: BehindRow,
      execute: (acknowledged) =>
        sql`SELECT count(*)::int AS behind FROM cache_leases
            WHERE expires_at > clock_timestamp() AND acked_version < ${acknowledged}::bigint`
    })
    const deadline = (yield* Clock.currentTimeMillis) + LEASE_MS + 100
    while ((yield* Clock.currentTimeMillis) < deadline) {
      // A count is one row always: none would be a bug, as a row of another shape.
      const { behind } = yield* behindCount(version).pipe(
        parseFailureIsDefect,
        Effect.catchTag("NoSuchElementException", Effect.die)
      )
      if (behind === 0) return
      yield* Effect.sleep("50 millis")
    }
  })
