/**
 * JWT ids seen once: a client assertion's `jti` (RFC 7523 §3) and a DPoP proof's (RFC
 * 9449 §11.1) are accepted only the first time, until they expire. Only accepted JWTs write here.
 * Where the authoritative check lives depends on who else can accept a JWT:
 *
 * - **PostgreSQL** (`layer` with a `SqlClient` and no `SoleWriter`): several instances share the
 *   database, and a replay must be refused on every one of them, so the check stays in `seen_jtis`:
 *   one statement per JWT (one round trip) inserts the id and says whether it was new; one claim in
 *   a hundred also purges what has expired. No memory in front of it: an id seen by another instance
 *   is in no cache here.
 * - **Embedded PGlite** (`SoleWriter`: one process holds the data directory, `DataDirLock`): no
 *   other process can accept a JWT on this database, so the check is made in this process's memory,
 *   as on memory storage, instead of a statement per JWT on the event loop (PGlite runs in it, and
 *   every statement waits for the one before: at a few hundred DPoP calls a second that INSERT was
 *   a fifth of the CPU and most of the latency). The table still receives every accepted id, written
 *   behind in batches (every `FLUSH_EVERY`, one INSERT per batch, and at the end of the layer's
 *   scope: a graceful shutdown writes them all), and the unexpired ones are read back when the layer
 *   starts, before the server answers anything: a restart opens no replay window. Only a crash
 *   (SIGKILL, power loss) can lose the ids accepted in its last `FLUSH_EVERY`, a tenth of a second.
 *   When memory is full of unexpired ids (`SOLE_WRITER_MAX`, some 2,000 proofs a second sustained),
 *   the oldest leaves it; until it would have expired, an id not in memory is claimed in the table
 *   (which holds every id written): slower, as before, but an eviction never lets a replay through.
 * - **Memory** (no `SqlClient`): this process's own memory, bounded (the oldest goes when full).
 */
import { sweepPeriodically } from "../domain/ExpiringEntries.js"
import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Context, Duration, Effect, Layer, Option, Schema } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import { sha256Base64url } from "../domain/Sha256.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

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

/**
 * Provided by a storage whose database this process alone uses (the embedded one, locked by
 * `DataDirLock`): the ids may then be checked in memory and written behind.
 */
export class SoleWriter extends Context.Tag("service-auth/SoleWriter")<SoleWriter, true>() {
  static readonly layer = Layer.succeed(SoleWriter, true as const)
}

const keyOf = (scope: string, jti: string) => sha256Base64url(`${scope}\u0000${jti}`)

/** At most this many ids in memory; beyond it the expired ones go, then the oldest. */
export const LOCAL_MAX = 100_000
/**
 * At most this many on the embedded database (about 110 bytes each: 28 MB when full): DPoP ids stay
 * 120 s, so about 2,000 proofs a second, sustained, before claims fall back on the table.
 */
export const SOLE_WRITER_MAX = 250_000
/** How often the embedded database's new ids are written to `seen_jtis`. */
export const FLUSH_EVERY = Duration.millis(100)
/** How often the write-behind also deletes the expired rows. */
const PURGE_EVERY_MILLIS = 10_000

/**
 * Ids in memory, each until it expires. When full: the expired ones at the front go (ids arrive in
 * about the order they expire), then every expired one (a whole scan, at most once per
 * `scanEveryMillis`), then the oldest; `evictedUntil` says until when an evicted one would have been
 * refused.
 */
export class LocalIds {
  readonly seen = new Map<string, number>()
  evictedUntil = 0
  private scannedAt = -Infinity
  constructor(readonly max: number, readonly scanEveryMillis: number) {}

  has(key: string, nowMillis: number): boolean {
    const until = this.seen.get(key)
    return until !== undefined && until > nowMillis
  }

  add(key: string, expiresAtMillis: number, nowMillis: number): void {
    if (this.seen.size >= this.max) this.makeRoom(nowMillis)
    this.seen.delete(key)
    this.seen.set(key, expiresAtMillis)
  }

  /** Drops every expired id (the periodic sweep: ids leave by themselves, even with no claims). */
  sweep(nowMillis: number): number {
    let dropped = 0
    for (const [key, until] of this.seen) {
      if (until <= nowMillis) {
        this.seen.delete(key)
        dropped++
      }
    }
    return dropped
  }

  private makeRoom(nowMillis: number): void {
    for (const [oldest, until] of this.seen) {
      if (until > nowMillis || this.seen.size < this.max) break
      this.seen.delete(oldest)
    }
    if (this.seen.size >= this.max && !(Math.abs(nowMillis - this.scannedAt) < this.scanEveryMillis)) {
      this.scannedAt = nowMillis
      for (const [other, until] of this.seen) if (until <= nowMillis) this.seen.delete(other)
    }
    if (this.seen.size >= this.max) {
      const [oldest, until] = this.seen.entries().next().value!
      this.seen.delete(oldest)
      if (until > nowMillis) this.evictedUntil = Math.max(this.evictedUntil, until)
    }
  }
}

const makeLocal = (max: number = LOCAL_MAX) =>
  Effect.gen(function*() {
    // Every expired id goes whenever memory is full, then the oldest (a replay of it is then accepted).
    const local = new LocalIds(max, 0)
    yield* sweepPeriodically([local])
    return {
      claim: (scope, jti, expiresAtMillis, nowMillis) =>
        Effect.sync(() => {
          const key = keyOf(scope, jti)
          if (local.has(key, nowMillis)) return false
          local.add(key, expiresAtMillis, nowMillis)
          return true
        })
    } satisfies SeenJtisShape
  })

const ClaimRequest = Schema.Struct({ key: Schema.String, expiresAt: Schema.DateFromSelf, now: Schema.DateFromSelf })
const ClaimedRow = Schema.Struct({ key: Schema.String })
/** An unexpired id read back at start: its key and when it expires, in epoch milliseconds. */
const UnexpiredRow = Schema.Struct({ key: Schema.String, until: Schema.Union(Schema.Number, Schema.NumberFromString) })

/** The one statement that claims an id in `seen_jtis`: true when it was new (or its row had expired). */
const claimInTable = (sql: SqlClient.SqlClient) => {
  const claim = SqlSchema.findAll({
    Request: ClaimRequest,
    Result: ClaimedRow,
    execute: ({ expiresAt, key, now }) =>
      sql`INSERT INTO seen_jtis (key, expires_at) VALUES (${key}, ${expiresAt})
        ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE seen_jtis.expires_at <= ${now}
        RETURNING key`
  })
  const purgeAndClaim = SqlSchema.findAll({
    Request: ClaimRequest,
    Result: ClaimedRow,
    execute: ({ expiresAt, key, now }) =>
      sql`WITH purged AS (DELETE FROM seen_jtis WHERE expires_at <= ${now})
        INSERT INTO seen_jtis (key, expires_at) VALUES (${key}, ${expiresAt})
        ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE seen_jtis.expires_at <= ${now}
        RETURNING key`
  })
  return (key: string, expiresAtMillis: number, nowMillis: number): Effect.Effect<boolean, StorageUnavailable> => {
    const request = { key, expiresAt: new Date(expiresAtMillis), now: new Date(nowMillis) }
    // One claim in a hundred also purges what has expired: the table stays small, claims stay one statement.
    const statement = Math.random() < 0.01 ? purgeAndClaim(request) : claim(request)
    return statement.pipe(Effect.map((rows) => rows.length === 1), parseFailureIsDefect, storageOperation)
  }
}

/** Shared by every instance: the table decides each claim. */
const makeShared = (sql: SqlClient.SqlClient): SeenJtisShape => {
  const claim = claimInTable(sql)
  return { claim: (scope, jti, expiresAtMillis, nowMillis) => claim(keyOf(scope, jti), expiresAtMillis, nowMillis) }
}

/**
 * One process's database: memory decides, the table is written behind and read back at start
 * (see the header). `max` bounds the ids in memory (tests make it small).
 */
export const makeSoleWriter = (sql: SqlClient.SqlClient, max: number = SOLE_WRITER_MAX) =>
  Effect.gen(function*() {
    const local = new LocalIds(max, 1000)
    yield* sweepPeriodically([local])
    const claimInDatabase = claimInTable(sql)
    // Accepted, not yet written; batches being written.
    let pending = new Map<string, number>()
    const writing = new Set<ReadonlyMap<string, number>>()
    let purgedAt = Date.now()

    const startedAt = new Date()
    yield* storageOperation(sql`DELETE FROM seen_jtis WHERE expires_at <= ${startedAt}`)
    const unexpired = SqlSchema.findAll({
      Request: Schema.DateFromSelf,
      Result: UnexpiredRow,
      execute: (now) =>
        sql`SELECT key, (extract(epoch FROM expires_at) * 1000)::float8 AS until
          FROM seen_jtis WHERE expires_at > ${now} ORDER BY expires_at`
    })
    const rows = yield* unexpired(startedAt).pipe(parseFailureIsDefect, storageOperation)
    for (const row of rows) local.add(row.key, row.until, startedAt.getTime())

    const unwritten = (key: string, nowMillis: number) => {
      const until = pending.get(key)
      if (until !== undefined && until > nowMillis) return true
      for (const batch of writing) {
        const batchUntil = batch.get(key)
        if (batchUntil !== undefined && batchUntil > nowMillis) return true
      }
      return false
    }

    const write = (batch: ReadonlyArray<readonly [string, number]>, nowMillis: number) =>
      Effect.gen(function*() {
        // One parameter, whatever the batch's size, on both drivers (as the last uses are written, `LastUse`).
        const rows = JSON.stringify(batch.map(([key, until]) => ({ key, expires_at: new Date(until).toISOString() })))
        yield* sql`INSERT INTO seen_jtis (key, expires_at)
          SELECT v.key, v.expires_at FROM json_to_recordset(${rows}::json) AS v(key text, expires_at timestamptz)
          ON CONFLICT (key) DO UPDATE SET expires_at = GREATEST(seen_jtis.expires_at, excluded.expires_at)`
        if (nowMillis - purgedAt >= PURGE_EVERY_MILLIS) {
          purgedAt = nowMillis
          yield* sql`DELETE FROM seen_jtis WHERE expires_at <= ${new Date(nowMillis)}`
        }
      })

    /** Writes what is pending in one statement; on failure keeps it pending for the next flush. */
    const flush = Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      const batch = pending
      pending = new Map()
      writing.add(batch)
      const nowMillis = Date.now()
      return storageOperation(write([...batch].filter(([, until]) => until > nowMillis), nowMillis)).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.sync(() => {
              for (const [key, until] of batch) if (!pending.has(key) && pending.size < max) pending.set(key, until)
            }),
            Effect.logWarning("Could not record seen JWT ids in seen_jtis; retrying", cause)
          )
        ),
        Effect.ensuring(Effect.sync(() => writing.delete(batch)))
      )
    })

    // The cadence is housekeeping on the real clock (as the last uses'): a TestClock moved by years
    // would otherwise run one flush per tenth of a second of them. A flush under way is finished,
    // never cut, when the scope ends; the finalizer (run before the loop is interrupted) writes the rest.
    yield* Effect.sleep(FLUSH_EVERY).pipe(
      Effect.zipRight(Effect.uninterruptible(flush)),
      Effect.forever,
      Effect.withClock(Clock.make()),
      Effect.forkScoped
    )
    // A write that failed (a busy machine can exceed the storage timeout) is pending again: tried up to three times.
    const flushAll = Effect.forEach([1, 2, 3], () => Effect.when(flush, () => pending.size > 0), { discard: true })
    yield* Effect.addFinalizer(() => flushAll)

    return {
      claim: (scope, jti, expiresAtMillis, nowMillis) =>
        Effect.suspend(() => {
          const key = keyOf(scope, jti)
          if (local.has(key, nowMillis) || unwritten(key, nowMillis)) return Effect.succeed(false)
          if (local.evictedUntil > nowMillis) {
            // Some unexpired id left memory: only the table (which holds every written id) can say this one is new.
            return Effect.map(claimInDatabase(key, expiresAtMillis, nowMillis), (fresh) => {
              if (fresh) local.add(key, expiresAtMillis, nowMillis)
              return fresh
            })
          }
          local.add(key, expiresAtMillis, nowMillis)
          pending.set(key, expiresAtMillis)
          return Effect.succeed(true)
        })
    } satisfies SeenJtisShape
  })

export class SeenJtis extends Context.Tag("service-auth/SeenJtis")<SeenJtis, SeenJtisShape>() {
  /** This process's own memory. */
  static readonly layerLocal = Layer.scoped(SeenJtis, makeLocal())

  /**
   * Chosen by the storage: in `seen_jtis` for every claim on a shared database (PostgreSQL), in
   * memory written behind to `seen_jtis` on one process's database (`SoleWriter`: embedded), in
   * memory without SQL.
   */
  static readonly layer = Layer.scoped(
    SeenJtis,
    Effect.gen(function*() {
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isNone(sql)) return yield* makeLocal()
      if (Option.isNone(yield* Effect.serviceOption(SoleWriter))) return makeShared(sql.value)
      return yield* makeSoleWriter(sql.value)
    })
  )
}
