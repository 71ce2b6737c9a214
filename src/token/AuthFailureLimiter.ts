/**
 * Brute-force protection of client authentication (RFC 6749 §2.3.1): after AUTH_FAILURE_LIMIT
 * failures for one client id from one remote address within a minute, that pair is refused (429)
 * until the minute is over. Keyed by the pair, so a client with the right secret elsewhere is never
 * locked out by someone else's failures.
 *
 * Exact under concurrency: a failed authentication is answered 401 only when it took one of the
 * pair's LIMIT attempts of the window (`recordFailure`), atomically: in this process's map where
 * counts are the process's own (memory, embedded database: taken synchronously), or by one
 * statement on the count every instance shares (`FailureCounts`, PostgreSQL), whose answer is the
 * attempt's rank in the window. A failure that got no attempt is answered 429, as if it had been
 * refused before the check: however many guesses run at once, on however many instances, at most
 * LIMIT wrong ones a minute are told they are wrong.
 *
 * The credential is checked first and the attempt taken after, for failures only: the check is a
 * digest compare, and a success (the hot path) then costs a lookup in this map, never a round trip.
 * The map holds what the shared count last answered and this instance's failures still being
 * counted: a pair is refused before its check once those reach the limit, and a success of a pair
 * with failures being counted waits for their answer (`admit`), so that a right guess among wrong
 * ones is refused when they were over the limit. What stays open without a round trip per success:
 * the first request an instance sees for a pair whose window other instances filled, when it holds
 * the right secret, is answered with a token (see docs/contract.md §1).
 *
 * Admin authentications are throttled by a limiter of their own (`AdminFailureLimiter`, scope
 * "admin"), keyed by the address alone, whose shared counts never meet a client's.
 */
import { Clock, Context, Deferred, Effect, Exit, FiberId, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import { sha256Base64url } from "../domain/Sha256.js"
import { sweepPeriodically } from "../domain/ExpiringEntries.js"
import { AppConfig } from "../config/AppConfig.js"
import { FailureCounts, type FailureCountsShape, type SharedWindow } from "./FailureCounts.js"

export const FAILURE_WINDOW_MS = 60_000
/**
 * Beyond this many tracked pairs, expired ones are dropped, then the oldest: about 220 bytes a
 * pair with an IPv6 address, whatever the client id sent (docs/performance.md): 22 MB at most. A pair
 * whose window is over also leaves by itself, at the layer's periodic sweep.
 */
export const MAX_TRACKED = 100_000

export interface AuthFailureLimiterShape {
  /** Seconds until the pair may try again, when this instance knows it refused. */
  readonly blockedFor: (clientId: string, address: string) => Effect.Effect<Option.Option<number>>
  /** `blockedFor` at a given time (ms since the epoch), synchronously: checked before any credential is. */
  readonly blockedAt: (clientId: string, address: string, nowMillis: number) => Option.Option<number>
  /**
   * A failed authentication takes one of the pair's attempts of the window: none when it got one
   * (answer 401), the seconds until the window closes when none was left (answer 429).
   */
  readonly recordFailure: (clientId: string, address: string) => Effect.Effect<Option.Option<number>>
  /** Whether a failure of the pair is being counted by the shared store right now (`admit` would wait). */
  readonly counting: (clientId: string, address: string) => boolean
  /**
   * The last check of a successful authentication: waits until this instance's failures of the pair
   * are counted, then `blockedFor`. Without such failures, at once.
   */
  readonly admit: (clientId: string, address: string) => Effect.Effect<Option.Option<number>>
  /** Drops the pairs whose window is over and that have no failure being counted; answers how many. */
  readonly sweep: (nowMillis: number) => number
  /** Pairs held now (for tests of the bound). */
  readonly tracked: () => number
}

interface PairWindow {
  /** Failures taken in the window: the shared count as last answered, where counts are shared. */
  count: number
  /** When the window closes, in ms since the epoch. */
  resetAt: number
  /** Whether the window is one the shared store answered (otherwise opened here, not yet answered). */
  confirmed: boolean
  /** This instance's failures of the pair that the shared store is counting now. */
  counting: number
  /** Completed when `counting` is back to zero: what a success waits for. */
  settled: Deferred.Deferred<void> | undefined
}

const secondsUntil = (resetAt: number, now: number) => Math.max(1, Math.ceil((resetAt - now) / 1000))

export const makeAuthFailureLimiter = (limit: number, counts?: FailureCountsShape, scope = "") =>
  Effect.sync(() => {
    const shared = counts?.shared === true ? counts : undefined
    const pairs = new Map<string, PairWindow>()
    // The client id is whatever the sender wrote: past the length of a real one (or an address), the
    // pair is held by its digest, so the bytes of an entry are bounded whatever was sent.
    const key = (clientId: string, address: string) => {
      const pair = `${address}\u0000${clientId}`
      return clientId.length <= 64 && address.length <= 64 ? pair : `#${sha256Base64url(pair)}`
    }

    const sweep = (now: number) => {
      let dropped = 0
      for (const [k, pair] of pairs) {
        if (pair.resetAt <= now && pair.counting === 0) {
          pairs.delete(k)
          dropped++
        }
      }
      return dropped
    }
    const prune = (now: number) => {
      sweep(now)
      while (pairs.size >= MAX_TRACKED) pairs.delete(pairs.keys().next().value!)
    }

    /** The pair's window at `now`: the open one, or a new one from now (its failures in flight kept). */
    const open = (k: string, now: number): PairWindow => {
      const pair = pairs.get(k)
      if (pair === undefined) {
        if (pairs.size >= MAX_TRACKED) prune(now)
        const opened: PairWindow = { count: 0, resetAt: now + FAILURE_WINDOW_MS, confirmed: false, counting: 0, settled: undefined }
        pairs.set(k, opened)
        return opened
      }
      if (pair.resetAt <= now) {
        pair.count = 0
        pair.resetAt = now + FAILURE_WINDOW_MS
        pair.confirmed = false
      }
      return pair
    }

    /** Failures taken or being taken: once they reach the limit, the window has no attempt left. */
    const full = (pair: PairWindow) => pair.count + pair.counting >= limit

    const blockedAt = (clientId: string, address: string, now: number): Option.Option<number> => {
      if (pairs.size === 0) return Option.none()
      const pair = pairs.get(key(clientId, address))
      return pair !== undefined && pair.resetAt > now && full(pair) ? Option.some(secondsUntil(pair.resetAt, now)) : Option.none()
    }

    /** The shared store's answers may arrive out of order: keep the latest window, and its highest count. */
    const learn = (pair: PairWindow, window: SharedWindow) => {
      if (!pair.confirmed || window.resetAt > pair.resetAt || (window.resetAt === pair.resetAt && window.count > pair.count)) {
        pair.count = window.count
        pair.resetAt = window.resetAt
        pair.confirmed = true
      }
    }

    /** A counted failure's verdict, once the shared store answered (or could not). */
    const settle = (pair: PairWindow, answered: Exit.Exit<Option.Option<SharedWindow>>, now: number): Option.Option<number> => {
      pair.counting--
      let verdict = Option.none<number>()
      if (Exit.isSuccess(answered)) {
        if (Option.isSome(answered.value)) {
          const window = answered.value.value
          learn(pair, window)
          // Its rank in the window: only the first LIMIT failures are evaluated (answered 401).
          if (window.count > limit) verdict = Option.some(secondsUntil(window.resetAt, now))
        } else if (pair.count + pair.counting < limit) {
          // Without the database, this instance counts on its own until it is back.
          pair.count++
        } else {
          verdict = Option.some(secondsUntil(pair.resetAt, now))
        }
      }
      if (pair.counting === 0 && pair.settled !== undefined) {
        Deferred.unsafeDone(pair.settled, Exit.void)
        pair.settled = undefined
      }
      return verdict
    }

    const pairDigest = (k: string) =>
      // Stored as a digest: the client id sent may be any text, and its length is the sender's.
      createHash("sha256").update(scope === "" ? k : `${scope}\u0000${k}`).digest("hex")

    const recordFailure = (clientId: string, address: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        // Whatever interrupts the request, a failure being counted is settled: its waiters released.
        Effect.uninterruptibleMask((restore) => {
          const k = key(clientId, address)
          const pair = open(k, now)
          if (full(pair)) return Effect.succeed(Option.some(secondsUntil(pair.resetAt, now)))
          if (shared === undefined) {
            pair.count++
            return Effect.succeed(Option.none<number>())
          }
          pair.counting++
          pair.settled ??= Deferred.unsafeMake<void>(FiberId.none)
          const answered = Effect.exit(restore(shared.add(pairDigest(k), now, FAILURE_WINDOW_MS)))
          return Effect.map(answered, (exit) => settle(pair, exit, now))
        }))

    return {
      blockedAt,
      blockedFor: (clientId, address) =>
        pairs.size === 0
          ? Effect.succeed(Option.none())
          : Effect.map(Clock.currentTimeMillis, (now) => blockedAt(clientId, address, now)),
      recordFailure,
      counting: (clientId, address) => pairs.size > 0 && (pairs.get(key(clientId, address))?.counting ?? 0) > 0,
      admit: (clientId, address) =>
        Effect.suspend(() => {
          const settled = pairs.size === 0 ? undefined : pairs.get(key(clientId, address))?.settled
          const check = Effect.map(Clock.currentTimeMillis, (now) => blockedAt(clientId, address, now))
          return settled === undefined ? check : Effect.zipRight(Deferred.await(settled), check)
        }),
      sweep,
      tracked: () => pairs.size
    } satisfies AuthFailureLimiterShape
  })

export class AuthFailureLimiter extends Context.Tag("service-auth/AuthFailureLimiter")<
  AuthFailureLimiter,
  AuthFailureLimiterShape
>() {
  static readonly layer = Layer.scoped(
    AuthFailureLimiter,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const limiter = yield* makeAuthFailureLimiter(config.authFailureLimit, yield* FailureCounts)
      yield* sweepPeriodically([limiter])
      return limiter
    })
  )
}

/**
 * Failed admin authentications, keyed by the client address alone: one count for every endpoint
 * that takes an admin token (the admin API, `/oauth/introspect`), so that spreading guesses over
 * them gains nothing.
 */
export class AdminFailureLimiter extends Context.Tag("service-auth/AdminFailureLimiter")<
  AdminFailureLimiter,
  AuthFailureLimiterShape
>() {
  /** The limiter's client-id slot: admin failures are keyed by the address alone. */
  static readonly ANY_CLIENT = ""

  static readonly layer = Layer.scoped(
    AdminFailureLimiter,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const limiter = yield* makeAuthFailureLimiter(config.authFailureLimit, yield* FailureCounts, "admin")
      yield* sweepPeriodically([limiter])
      return limiter
    })
  )
}
