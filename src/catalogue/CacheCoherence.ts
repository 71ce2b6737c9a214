/**
 * Keeps an instance's cache coherent with PostgreSQL (docs/cache-coherence.md). One dedicated
 * connection listens for the changes catalogue writes announce at commit, drops the cache and
 * acknowledges each, and renews the instance's lease every `RENEW_EVERY_MS`; `settle` makes a
 * write of this instance wait until every other instance holding a live lease has acknowledged it,
 * or until that lease can no longer be trusted (at most `LEASE_MS` and a little).
 *
 * The connection is node-postgres's own `Client`, not @effect/sql-pg's `listen`: whether the
 * listening connection is up, and since when, is part of the protocol, and the pooled listener
 * reconnects out of sight. Whatever goes wrong on it (an error, a timeout, the end) closes it and
 * withdraws the cache's trust at once; a new connection is opened after `RECONNECT_AFTER_MS`.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Cause, Clock, Data, Deferred, Duration, Effect, Option, Queue, Redacted, Schema } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { CacheLease, LEASE_MS, RENEW_EVERY_MS } from "./CacheLease.js"
import { type CatalogueScope, parseAnnouncement } from "./CatalogueScope.js"
import type { CacheGuard } from "./CredentialRepoCache.js"
import { CATALOGUE_CHANNEL, SCOPES_CHANNEL } from "./CatalogueWritesSql.js"
import { parseFailureIsDefect } from "../storage/StorageErrors.js"

/** Where instances announce that they have dropped their cache for a version (payload: their id). */
const ACK_CHANNEL = "service_auth_cache_ack"
/** A statement on the listening connection that takes longer means the connection is lost. */
const QUERY_TIMEOUT = Duration.seconds(1)
const RECONNECT_AFTER = Duration.millis(500)
/** How often a waiting write looks at the leases when no acknowledgement wakes it. */
const SETTLE_POLL_MS = 50
/** Past the lease, what a waiting write adds for the clocks' differences. */
const SETTLE_SLACK_MS = 100
/** Scopes heard whose version was not (yet) announced, at most: they arrive just before it. */
const MAX_SCOPES_AHEAD = 64
/** Every this many renewals, leases of instances gone for a minute are deleted. */
const PURGE_EVERY = 120

const VersionRow = Schema.Struct({ version: Schema.String })
const InstanceRow = Schema.Struct({ instance_id: Schema.String })
/** What a renewal answers: the catalogue version it read (bigint as text). */
const decodeRenewal = Schema.decodeUnknownSync(
  Schema.Tuple(Schema.Struct({ version: Schema.BigInt }))
)

class ListenerLost extends Data.TaggedError("ListenerLost")<{ readonly reason: string }> {}
const lostBecause = (cause: unknown) => new ListenerLost({ reason: cause instanceof Error ? cause.message : String(cause) })

/** Closes a client for good, even one whose server has stopped answering (`end` would wait). */
const destroy = (client: pg.Client) => {
  client.removeAllListeners("notification")
  ;(client as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.()
  client.end().catch(() => undefined)
}

export const make = (url: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Real time, whatever clock the rest of the program runs on: leases are compared with the
    // database's clock (tests drive `CacheLease` with `TestClock` directly).
    const clock = Clock.make()
    // Read on every cached answer: performance.now() is monotonic and allocates nothing.
    const now = () => performance.now()
    const lease = new CacheLease(now)
    const instanceId = randomUUID()
    const connectionString = Redacted.value(url)
    const readVersion = SqlSchema.findOne({
      Request: Schema.Void,
      Result: VersionRow,
      execute: () => sql`SELECT version::text AS version FROM catalogue_version`
    })
    /** Other instances whose lease is live and behind `version`. */
    const leasesBehind = SqlSchema.findAll({
      Request: Schema.String,
      Result: InstanceRow,
      execute: (version) =>
        sql`
        SELECT instance_id FROM cache_leases
        WHERE instance_id <> ${instanceId} AND expires_at > clock_timestamp() AND acked_version < ${version}::bigint`
    })

    /** Writes waiting for acknowledgements, woken by each one; `acknowledgements` counts them all. */
    let waiters: Array<() => void> = []
    let acknowledgements = 0
    const wakeWaiters = () => {
      acknowledgements++
      const woken = waiters
      waiters = []
      for (const wake of woken) wake()
    }

    const query = (client: pg.Client, text: string, values?: ReadonlyArray<unknown>) =>
      Effect.tryPromise({
        try: () => client.query(text, values as Array<unknown> | undefined),
        catch: lostBecause
      }).pipe(
        Effect.timeoutFail({ duration: QUERY_TIMEOUT, onTimeout: () => new ListenerLost({ reason: "no answer" }) })
      )

    const acknowledge = (client: pg.Client, version: bigint) =>
      query(
        client,
        `WITH acked AS (
           UPDATE cache_leases SET acked_version = GREATEST(acked_version, $2::bigint) WHERE instance_id = $1
           RETURNING instance_id)
         SELECT pg_notify('${ACK_CHANNEL}', instance_id) FROM acked`,
        [instanceId, version.toString()]
      )

    /**
     * One renewal, in one statement (a lock is never held across a round trip, so an instance
     * frozen mid-renewal blocks nobody). The catalogue version is read under the lock every
     * catalogue write takes first: a write either committed before (its version is read here, and
     * the cache dropped before the version is acknowledged) or waits until this lease is visible.
     * The lease acknowledges only what was dropped before the renewal began.
     */
    let renewals = 0
    const renew = (client: pg.Client) =>
      Effect.gen(function*() {
        const attempt = lease.renewalStarted()
        const { rows } = yield* query(
          client,
          `WITH catalogue AS (SELECT version FROM catalogue_version FOR SHARE)
           INSERT INTO cache_leases (instance_id, expires_at, acked_version)
           VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond', $3)
           ON CONFLICT (instance_id) DO UPDATE SET
             expires_at = excluded.expires_at,
             acked_version = GREATEST(cache_leases.acked_version, excluded.acked_version)
           RETURNING (SELECT version::text FROM catalogue) AS version`,
          [instanceId, LEASE_MS, lease.seenVersion.toString()]
        )
        const [{ version }] = decodeRenewal(rows)
        // Anything newer is dropped now; the acknowledgement follows, as for an announcement.
        if (lease.versionRead(version)) yield* acknowledge(client, version)
        lease.renewed(attempt)
        if (++renewals % PURGE_EVERY === 0) {
          yield* query(client, "DELETE FROM cache_leases WHERE expires_at < clock_timestamp() - interval '1 minute'")
        }
      })

    /** One listening connection, from its opening to its loss (an error, a timeout, the end). */
    let connections = 0
    const session = Effect.gen(function*() {
      const connection = ++connections
      const lost = yield* Deferred.make<never, ListenerLost>()
      const announced = yield* Queue.unbounded<bigint>()
      /** What the writes announced changed, by version, until their version is announced. */
      const scopesOf = new Map<bigint, ReadonlyArray<CatalogueScope> | undefined>()
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const client = new pg.Client({
              connectionString,
              application_name: "service-auth",
              connectionTimeoutMillis: Duration.toMillis(QUERY_TIMEOUT),
              keepAlive: true
            })
            // Always listened to: an unhandled `error` event would stop the process.
            client.on("error", (cause) => Deferred.unsafeDone(lost, Effect.fail(lostBecause(cause))))
            client.on("end", () => Deferred.unsafeDone(lost, Effect.fail(new ListenerLost({ reason: "closed" }))))
            try {
              await client.connect()
            } catch (cause) {
              destroy(client)
              throw cause
            }
            return client
          },
          catch: lostBecause
        }),
        (client) => Effect.sync(() => destroy(client))
      )
      client.on("notification", ({ channel, payload }) => {
        if (channel === ACK_CHANNEL) return wakeWaiters()
        if (payload === undefined) return
        if (channel === SCOPES_CHANNEL) {
          const change = parseAnnouncement(payload)
          if (change === undefined) return
          if (scopesOf.size >= MAX_SCOPES_AHEAD) scopesOf.clear()
          return void scopesOf.set(change.version, change.scopes)
        }
        if (channel !== CATALOGUE_CHANNEL || !/^\d+$/.test(payload)) return
        const version = BigInt(payload)
        const scopes = scopesOf.get(version)
        scopesOf.clear()
        // What changed is dropped here, synchronously (its scopes, or everything when they were
        // not heard); the acknowledgement follows.
        if (lease.announced(version, scopes)) Queue.unsafeOffer(announced, version)
      })
      yield* query(client, `LISTEN ${SCOPES_CHANNEL}`)
      yield* query(client, `LISTEN ${CATALOGUE_CHANNEL}`)
      yield* query(client, `LISTEN ${ACK_CHANNEL}`)
      lease.listening(connection)
      if (connection > 1) yield* Effect.logInfo("cache: listening again; the cache is used once the lease is renewed")

      // One acknowledgement for however many announcements arrived meanwhile: the latest covers all.
      const acknowledging = Queue.take(announced).pipe(
        Effect.zipRight(Queue.takeAll(announced)),
        Effect.zipRight(Effect.suspend(() => acknowledge(client, lease.seenVersion))),
        Effect.forever
      )
      const renewing = Effect.forever(Effect.zipRight(renew(client), Effect.sleep(Duration.millis(RENEW_EVERY_MS))))
      // Runs until the first of them fails: then the connection is closed and trust withdrawn.
      return yield* Effect.all([Deferred.await(lost), acknowledging, renewing], { concurrency: "unbounded", discard: true })
    }).pipe(
      Effect.scoped,
      Effect.ensuring(Effect.sync(() => lease.listenLost()))
    )

    yield* session.pipe(
      Effect.catchAllCause((cause) =>
        Effect.logWarning(
          `cache: the listening connection to PostgreSQL is lost (${
            Option.match(Cause.failureOption(cause), { onSome: (lost) => lost.reason, onNone: () => Cause.pretty(cause) })
          }); reading the database until it is back`
        )
      ),
      Effect.zipRight(Effect.sleep(RECONNECT_AFTER)),
      Effect.forever,
      Effect.withClock(clock),
      Effect.forkScoped
    )

    // On a clean stop, the lease is withdrawn so that nobody waits for this instance any more.
    yield* Effect.addFinalizer(() =>
      sql`DELETE FROM cache_leases WHERE instance_id = ${instanceId}`.pipe(
        Effect.timeout(Duration.millis(500)),
        Effect.ignore
      )
    )

    /** Resolves at the next acknowledgement, or after `ms`. */
    const nextAcknowledgement = (ms: number) =>
      Effect.race(
        Effect.async<void>((resume) => {
          const wake = () => resume(Effect.void)
          waiters.push(wake)
          return Effect.sync(() => {
            waiters = waiters.filter((w) => w !== wake)
          })
        }),
        Effect.sleep(Duration.millis(Math.max(0, ms)))
      )

    /**
     * After a write committed: wait until no other live lease is behind the catalogue version. Any
     * instance's trust in what it read before the write ends within `LEASE_MS` of the commit
     * (renewals after the commit read the new version and drop the cache first), so that is the
     * longest the wait can need, even if the leases cannot be read.
     */
    const settle = Effect.gen(function*() {
      const deadline = now() + LEASE_MS + SETTLE_SLACK_MS
      const version = yield* readVersion(undefined).pipe(
        parseFailureIsDefect,
        Effect.map(Option.match({ onNone: () => undefined, onSome: (row) => row.version })),
        Effect.timeout(Duration.millis(LEASE_MS)),
        Effect.orElseSucceed(() => undefined)
      )
      while (now() < deadline) {
        // An acknowledgement that arrives while the leases are being read is not waited for again.
        const heard = acknowledgements
        const behind = version === undefined ? undefined : yield* leasesBehind(version)
          .pipe(
            parseFailureIsDefect,
            Effect.timeout(Duration.millis(Math.max(1, deadline - now()))),
            Effect.orElseSucceed(() => undefined)
          )
        if (behind !== undefined && behind.length === 0) return
        if (acknowledgements !== heard) continue
        yield* nextAcknowledgement(Math.min(SETTLE_POLL_MS, deadline - now()))
      }
      yield* Effect.logWarning("cache: a change waited out the lease of an instance that did not acknowledge it")
    }).pipe(Effect.withClock(clock), Effect.withSpan("CacheCoherence.settle", { captureStackTrace: false }))

    return {
      generation: lease.generation,
      invalidate: lease.invalidate,
      onScopedChange: lease.onScopedChange,
      settle
    } satisfies CacheGuard
  })
