/**
 * The policies a profile or a service may set (issue 37): the longest lifetime of a profile's new
 * credentials, and a service's per-client rate limit. Kept apart from `Models.ts`, which uses them.
 */
import { Schema } from "effect"

/** The most a service's rate limit may allow, and its longest window. */
export const RATE_LIMIT_MAX_REQUESTS = 1_000_000
export const RATE_LIMIT_MAX_SECONDS = 3_600

/** A per-client rate limit of a service: at most `requests` calls per `per_seconds` seconds, per client, per instance. */
export const RateLimit = Schema.Struct({
  requests: Schema.Int.pipe(Schema.between(1, RATE_LIMIT_MAX_REQUESTS, {
    message: () => `rate_limit.requests must be an integer from 1 to ${RATE_LIMIT_MAX_REQUESTS}`
  })),
  per_seconds: Schema.Int.pipe(Schema.between(1, RATE_LIMIT_MAX_SECONDS, {
    message: () => `rate_limit.per_seconds must be an integer from 1 to ${RATE_LIMIT_MAX_SECONDS}`
  }))
}).annotations({
  identifier: "RateLimit",
  parseOptions: { onExcessProperty: "error" },
  description: "Each client (a token's client_id; the client address for a service without OAuth) may make at most " +
    "`requests` calls (1-1000000) per `per_seconds` seconds (1-3600), counted by each instance; beyond, 429 rate_limited."
})
export type RateLimit = typeof RateLimit.Type

/** The longest lifetime a profile's policy may set, in days (ten years). */
export const MAX_LIFETIME_DAYS = 3650
export const CredentialMaxLifetimeDays = Schema.Int.pipe(Schema.between(1, MAX_LIFETIME_DAYS, {
  message: () => `credential_max_lifetime_days must be an integer from 1 to ${MAX_LIFETIME_DAYS}, or null`
})).annotations({
  description: "The longest lifetime of a new credential of the profile, in days (1-3650): one created without " +
    "expires_at gets it, one asking for more is refused."
})

/** What `PUT /admin/profiles/{profile}` may send: the credential policy, or nothing. */
export const ProfileInput = Schema.Struct({
  credential_max_lifetime_days: Schema.optional(Schema.NullOr(CredentialMaxLifetimeDays)).annotations({
    description: "Sets the policy (null removes it); absent leaves it as it is."
  })
}).annotations({
  identifier: "ProfileInput",
  parseOptions: { onExcessProperty: "error" },
  description: "`{}` (or no body), or the profile's credential policy."
})
export type ProfileInput = typeof ProfileInput.Type
