/**
 * Brute-force protection of client authentication (RFC 6749 §2.3.1): after AUTH_FAILURE_LIMIT
 * failures for one client id from one remote address within a minute, that pair is refused (429)
 * until the minute is over. Keyed by the pair, so a client with the right secret elsewhere is never
 * locked out by someone else's failures.
 *
 * The check is a lookup in this instance's map (the success path never touches storage). A failure
 * is also added to the count every instance shares (`FailureCounts`, on PostgreSQL), and the shared
 * count it answers replaces the local one: instances learn of each other's failures as they record
 * their own, so N instances allow the limit for a pair, plus at most one more guess each, not N
 * times the limit.
 *
 * Admin authentications are throttled by a limiter of their own (`scope` "admin", see
 * `AdminAuthHttp`), keyed by the address alone, whose shared counts never meet a client's.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import { FailureCounts, type FailureCountsShape } from "../storage/FailureCounts.js"

export const FAILURE_WINDOW_MS = 60_000
/** Beyond this many tracked pairs, expired ones are dropped, then the oldest. */
const MAX_TRACKED = 100_000

export interface AuthFailureLimiterShape {
  /** Seconds until the pair may try again, when it is currently refused. */
  readonly blockedFor: (clientId: string, address: string) => Effect.Effect<Option.Option<number>>
  /** `blockedFor` at a given time (ms since the epoch), synchronously: for the fast lane. */
  readonly blockedAt: (clientId: string, address: string, nowMillis: number) => Option.Option<number>
  readonly recordFailure: (clientId: string, address: string) => Effect.Effect<void>
}

interface Window {
  count: number
  readonly resetAt: number
}

export const makeAuthFailureLimiter = (limit: number, shared?: FailureCountsShape, scope = "") =>
  Effect.sync(() => {
    const windows = new Map<string, Window>()
    const key = (clientId: string, address: string) => `${address}\u0000${clientId}`

    const prune = (now: number) => {
      for (const [k, window] of windows) if (window.resetAt <= now) windows.delete(k)
      while (windows.size >= MAX_TRACKED) windows.delete(windows.keys().next().value!)
    }

    const blockedAt = (clientId: string, address: string, now: number): Option.Option<number> => {
      if (windows.size === 0) return Option.none()
      const window = windows.get(key(clientId, address))
      return window !== undefined && window.resetAt > now && window.count >= limit
        ? Option.some(Math.ceil((window.resetAt - now) / 1000))
        : Option.none()
    }

    return {
      blockedAt,
      blockedFor: (clientId, address) =>
        windows.size === 0
          ? Effect.succeed(Option.none())
          : Effect.map(Clock.currentTimeMillis, (now) => blockedAt(clientId, address, now)),
      recordFailure: (clientId, address) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const k = key(clientId, address)
          const window = windows.get(k)
          if (window !== undefined && window.resetAt > now) window.count++
          else {
            if (windows.size >= MAX_TRACKED) prune(now)
            windows.set(k, { count: 1, resetAt: now + FAILURE_WINDOW_MS })
          }
          if (shared === undefined) return
          // Stored as a digest: the client id sent may be any text, and its length is the sender's.
          const pair = createHash("sha256").update(scope === "" ? k : `${scope}\u0000${k}`).digest("hex")
          const counted = yield* shared.add(pair, now, FAILURE_WINDOW_MS)
          if (Option.isSome(counted)) windows.set(k, { count: counted.value.count, resetAt: counted.value.resetAt })
        })
    } satisfies AuthFailureLimiterShape
  })

export class AuthFailureLimiter extends Context.Tag("service-auth/AuthFailureLimiter")<
  AuthFailureLimiter,
  AuthFailureLimiterShape
>() {
  static readonly layer = Layer.effect(
    AuthFailureLimiter,
    Effect.gen(function*() {
      const config = yield* AppConfig
      return yield* makeAuthFailureLimiter(config.authFailureLimit, yield* FailureCounts)
    })
  )
}
