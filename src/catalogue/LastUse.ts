/**
 * A credential's last use (`last_used_at`): recorded by a token request whose credential's record
 * is a minute old (`lastUseIsStale`), and by a service call let through with one of its tokens
 * (`CallLastUse`). Both stores keep a use in memory when it is recorded; the SQL one writes them in
 * batches (`makeBatchedLastUse`, below), one statement a second whatever their number.
 */
import type { SqlClient } from "@effect/sql"
import { Clock, Context, Deferred, Duration, Effect, FiberId, type Scope } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import type { ClientId } from "../domain/Identifiers.js"
import { laterUse } from "../domain/LastUse.js"
import { storageOperation } from "../storage/StorageErrors.js"

export interface LastUseShape {
  /**
   * Records the use at `now`: the later of it and what was recorded wins, whatever the order. In
   * Effect, so that where traces are exported each use has its span (`CredentialRepo.touchCredential`).
   */
  readonly recordUse: (clientId: ClientId, now: Date) => Effect.Effect<void, StorageUnavailable>
  /**
   * `recordUse` done synchronously, for the hot paths (an Effect per use cost about a fifth of the
   * event loop); they use it where traces are not exported.
   */
  readonly recordUseSync: (clientId: ClientId, now: Date) => void
}

export class LastUse extends Context.Tag("service-auth/LastUse")<LastUse, LastUseShape>() {}

/**
 * The SQL store's last uses, written in batches: a use is kept in memory (`recordUse`, O(1)), and
 * one statement a second writes every use recorded since. Callers already record a credential at
 * most once a minute per kind of use, so a credential is still written at most twice a minute. The
 * statement keeps the later time (GREATEST): a use that arrives late, or another instance's older
 * one, never moves it back. What the admin API reads is never behind what was recorded: its reads
 * `flush` first; a stop flushes too. On PostgreSQL, another instance's uses reach the database
 * within `FLUSH_EVERY`.
 */

/** How often the recorded uses are written. */
export const FLUSH_EVERY = Duration.seconds(1)

export interface LastUseBatch {
  /** Records that the credential was used at `now` (the latest time recorded wins, whatever the order). */
  readonly recordUse: (clientId: string, now: Date) => void
  /** Writes every credential noted so far, in one statement; what fails is noted again. */
  readonly flush: Effect.Effect<void, StorageUnavailable>
  /** The time noted for a credential and not yet written (or being written), if any: reads answer it over the database's. */
  readonly pendingUse: (clientId: string) => Date | undefined
  /** How many credentials wait to be written (for tests). */
  readonly pending: () => number
}

export const makeLastUseBatch = (sql: SqlClient.SqlClient): Effect.Effect<LastUseBatch, never, Scope.Scope> =>
  Effect.gen(function*() {
    let noted = new Map<string, Date>()
    // Batches on their way to the database, each with its end: reads still answer their times until
    // they are written.
    const writing = new Map<ReadonlyMap<string, Date>, Deferred.Deferred<void>>()

    /** Writes what is noted, as one batch; its entry in `writing` ends however the write does. */
    const writeNoted = Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (noted.size === 0) return Effect.void
        const batch = noted
        noted = new Map()
        const written = Deferred.unsafeMake<void>(FiberId.none)
        writing.set(batch, written)
        // One parameter, whatever the batch's size, on both drivers.
        const rows = JSON.stringify([...batch].map(([client_id, at]) => ({ client_id, at: at.toISOString() })))
        return restore(sql`UPDATE credentials AS c SET last_used_at = GREATEST(c.last_used_at, v.at)
                   FROM json_to_recordset(${rows}::json) AS v(client_id text, at timestamptz)
                   WHERE c.client_id = v.client_id`).pipe(
          Effect.asVoid,
          storageOperation,
          Effect.tapError(() =>
            Effect.sync(() => {
              for (const [clientId, at] of batch) noted.set(clientId, laterUse(noted.get(clientId), at))
            })
          ),
          Effect.ensuring(Effect.suspend(() => {
            writing.delete(batch)
            return Deferred.succeed(written, undefined)
          }))
        )
      })
    )

    // A flush also waits for the batches already on their way (the periodic one's, another read's):
    // otherwise a read could miss a use twice, its statement starting before that batch committed and
    // `pendingUse` asked after the batch was forgotten.
    const flush = Effect.suspend(() => {
      const earlier = [...writing.values()]
      return Effect.zipRight(writeNoted, Effect.forEach(earlier, Deferred.await, { discard: true }))
    })

    const notedOf = (clientId: string): Date | undefined => {
      let latest = noted.get(clientId)
      for (const batch of writing.keys()) {
        const at = batch.get(clientId)
        if (at !== undefined) latest = laterUse(latest, at)
      }
      return latest
    }

    // The cadence is housekeeping on the real clock, as the coherence loops are: a TestClock moved
    // by years (`TestClock.setTime(Date.now())`) would otherwise run one flush per second of them.
    yield* Effect.sleep(FLUSH_EVERY).pipe(
      Effect.zipRight(Effect.ignore(flush)),
      Effect.forever,
      Effect.withClock(Clock.make()),
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() => Effect.ignore(Effect.timeout(flush, Duration.seconds(1))))

    return {
      recordUse: (clientId, now) => void noted.set(clientId, laterUse(noted.get(clientId), now)),
      pendingUse: notedOf,
      flush,
      pending: () => noted.size
    }
  })
