/**
 * Brute-force protection of client authentication (RFC 6749 §2.3.1): after AUTH_FAILURE_LIMIT
 * failures for one client id from one remote address within a minute, that pair is refused (429)
 * until the minute is over. Keyed by the pair, so a client with the right secret elsewhere is never
 * locked out by someone else's failures. Per instance, in memory, bounded in size; the success
 * path costs one map lookup.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../AppConfig.js"

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

export const makeAuthFailureLimiter = (limit: number) =>
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
        Effect.map(Clock.currentTimeMillis, (now) => {
          const k = key(clientId, address)
          const window = windows.get(k)
          if (window !== undefined && window.resetAt > now) {
            window.count++
            return
          }
          if (windows.size >= MAX_TRACKED) prune(now)
          windows.set(k, { count: 1, resetAt: now + FAILURE_WINDOW_MS })
        })
    } satisfies AuthFailureLimiterShape
  })

export class AuthFailureLimiter extends Context.Tag("service-auth/AuthFailureLimiter")<
  AuthFailureLimiter,
  AuthFailureLimiterShape
>() {
  static readonly layer = Layer.effect(
    AuthFailureLimiter,
    Effect.flatMap(AppConfig, (config) => makeAuthFailureLimiter(config.authFailureLimit))
  )
}
