/**
 * The policies a profile or a service may set: the longest lifetime of a profile's new
 * credentials, and a service's per-client rate limit. Kept apart from `Models.ts`, which uses them.
 */
import { Schema } from "effect"
import { UpstreamOrigins } from "./UpstreamPolicy.js"

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
/** The rule, without the field's name: an answer names the field once, as its path (`DecodeFailure`). */
const LIFETIME_RULE = `must be an integer from 1 to ${MAX_LIFETIME_DAYS} (days), or null to remove the policy`
export const CredentialMaxLifetimeDays = Schema.Int.pipe(Schema.between(1, MAX_LIFETIME_DAYS, {
  message: () => LIFETIME_RULE
})).annotations({
  description: "The longest lifetime of a new credential of the profile, in days (1-3650): one created without " +
    "expires_at gets it, one asking for more is refused."
})

/** What `PUT /admin/profiles/{profile}` may send: the credential policy, or nothing. */
/**
 * A body that used to be `EmptyObject` and now may carry a few optional fields: anything that is
 * not an object of those fields is refused in `EmptyObject`'s words, so that what was refused
 * before answers exactly as it did; the fields themselves are then checked by `fields`.
 */
export const emptyObjectOr = <A, I>(
  fields: Schema.Schema<A, I>,
  names: ReadonlyArray<string>,
  annotations: { readonly identifier: string; readonly description: string; readonly jsonSchema: object }
) =>
  Schema.compose(
    Schema.Unknown.pipe(Schema.filter((value) =>
      value === null
        ? "Expected {}"
        : typeof value === "object" && !Array.isArray(value) && Object.keys(value).every((key) => names.includes(key))
        ? true
        : "the body must be an empty JSON object"
    )),
    fields,
    { strict: false }
  ).annotations(annotations)

const PROFILE_INPUT_DESCRIPTION = "`{}` (or no body), or the profile's credential policy, or (admin tokens only) " +
  "the origins its proxy services may target."
export const ProfileInput = emptyObjectOr(
  Schema.Struct({
    // A string or a fraction is told the rule too, not the union's "Expected number | null | undefined".
    credential_max_lifetime_days: Schema.optional(
      Schema.NullOr(CredentialMaxLifetimeDays).annotations({ message: () => ({ message: LIFETIME_RULE, override: true }) })
    ),
    upstream_origins: Schema.optional(Schema.NullOr(UpstreamOrigins))
  }),
  ["credential_max_lifetime_days", "upstream_origins"],
  {
    identifier: "ProfileInput",
    description: PROFILE_INPUT_DESCRIPTION,
    jsonSchema: {
      type: "object",
      properties: {
        credential_max_lifetime_days: {
          anyOf: [{ type: "integer", minimum: 1, maximum: 3650 }, { type: "null" }],
          description: "Sets the policy, the longest lifetime of a new credential in days (null removes it); " +
            "absent leaves it as it is."
        },
        upstream_origins: {
          anyOf: [
            { type: "array", maxItems: 50, items: { type: "string", description: "scheme://host[:port], http or https" } },
            { type: "null" }
          ],
          description: "Admin tokens only (an owner gets 403): the origins this profile's proxy services may target " +
            "besides UPSTREAM_ALLOWED_ORIGINS; null or [] removes them; absent leaves them as they are."
        }
      },
      additionalProperties: false,
      description: PROFILE_INPUT_DESCRIPTION
    }
  }
)
export type ProfileInput = typeof ProfileInput.Type
