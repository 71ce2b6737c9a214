/**
 * Per-client rate limits of services (`rate_limit`): each client of a limited service
 * may make `requests` calls per `per_seconds` seconds. A client is a token's `client_id`, or the
 * client address for a service without OAuth. Counted by each instance in memory, in fixed windows
 * that start at a client's first call: exact across instances would cost a database round trip on
 * every call, for a limit whose purpose (one client must not starve the others) an approximation
 * serves as well; N instances let a client through at most N times the limit.
 *
 * O(1) per call: one map read and write. Memory is bounded by design: at most `capacity` windows;
 * a new one past it evicts the window started longest ago (whose client then starts afresh). A
 * window renewed moves to the end, so the map's first entry is always the oldest; a window that
 * has ended leaves by itself (`ExpiringEntries`, swept every minute).
 *
 * Every answer of a limited service carries the IETF draft's fields
 * (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy: "default";q=<requests>;w=<seconds>`
 * and `RateLimit: "default";r=<remaining>;t=<seconds until the window resets>`.
 */
import { Context, Effect, Layer } from "effect"
import type { Answer } from "../domain/Answer.js"
import { errorAnswer } from "../domain/Answer.js"
import { RateLimited } from "../domain/Errors.js"
import { sha256Base64url } from "../domain/Sha256.js"
import { ExpiringEntries, sweepPeriodically } from "../domain/ExpiringEntries.js"
import type { RateLimit } from "../domain/Policies.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"

/**
 * Windows held at most: about 200 bytes each, whatever the names and clients, since a long key is
 * held by its digest (docs/performance.md): 20 MB at most.
 */
export const MAX_RATE_WINDOWS = 100_000

/** Keys longer than this are held by their SHA-256 digest (43 characters). */
const MAX_PLAIN_KEY = 96

/** A call let through, with the headers its answer carries; or the 429 that refuses it. */
export type RateVerdict =
  | { readonly allowed: true; readonly headers: Readonly<Record<string, string>> }
  | { readonly allowed: false; readonly answer: Answer }

interface RateWindow {
  count: number
  resetAt: number
}

export const rateLimitPolicy = (limit: RateLimit) => `"default";q=${limit.requests};w=${limit.per_seconds}`

export const rateLimitDescription = (limit: RateLimit) =>
  `Too many calls: this service allows each client ${limit.requests} calls per ${limit.per_seconds} seconds`

export interface RateLimitsShape {
  /** Counts a call of `client` to the service at `address` under `limit`, at `nowMillis`. */
  readonly admit: (address: ServiceAddress, limit: RateLimit, client: string, nowMillis: number) => RateVerdict
  /** Windows held now (for tests of the bound). */
  readonly size: () => number
  /** Drops the windows that have ended. */
  readonly sweep: (nowMillis: number) => number
}

export const makeRateLimits = (capacity = MAX_RATE_WINDOWS): RateLimitsShape => {
  const windows = new ExpiringEntries<string, RateWindow>(capacity)
  const admit = (address: ServiceAddress, limit: RateLimit, client: string, nowMillis: number): RateVerdict => {
    const long = `${address.profile}\u0000${address.environment}\u0000${address.uuid}\u0000${client}`
    // A key past the length of a short name's is held by its digest: the bytes of a window stay
    // bounded whatever the names and the client (an address, or a client id) are.
    const key = long.length <= MAX_PLAIN_KEY ? long : sha256Base64url(long)
    let window = windows.get(key, nowMillis)
    if (window === undefined) {
      window = { count: 0, resetAt: nowMillis + limit.per_seconds * 1000 }
      windows.set(key, window, window.resetAt, nowMillis)
    }
    const resetSeconds = Math.max(1, Math.ceil((window.resetAt - nowMillis) / 1000))
    const policy = rateLimitPolicy(limit)
    if (window.count >= limit.requests) {
      return {
        allowed: false,
        answer: errorAnswer(new RateLimited({ description: rateLimitDescription(limit), retryAfterSeconds: resetSeconds }), {
          "ratelimit-policy": policy,
          "ratelimit": `"default";r=0;t=${resetSeconds}`
        })
      }
    }
    window.count++
    return {
      allowed: true,
      headers: { "ratelimit-policy": policy, "ratelimit": `"default";r=${limit.requests - window.count};t=${resetSeconds}` }
    }
  }
  return { admit, size: () => windows.size, sweep: (nowMillis) => windows.sweep(nowMillis) }
}

/** The windows of this server, released with it. */
export class RateLimits extends Context.Tag("service-auth/RateLimits")<RateLimits, RateLimitsShape>() {
  static readonly layer = Layer.scoped(
    RateLimits,
    Effect.gen(function*() {
      const limits = makeRateLimits()
      yield* sweepPeriodically([limits])
      return limits
    })
  )
}
