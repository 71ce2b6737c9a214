/**
 * Which upstreams a profile's proxy services may target: the operator's decision. An admin names
 * origins deployment-wide (`UPSTREAM_ALLOWED_ORIGINS`) and per profile (`upstream_origins`); a
 * proxy URL set by an admin token is not judged at all (the service is then `upstream_approved`).
 * A URL set by any other role (an owner) is judged by `judgeUpstream`:
 *
 * 1. its origin is in either list: allowed, wherever it resolves (the admin named it);
 * 2. otherwise, when either list is non-empty: refused (not among the allowed origins);
 * 3. otherwise (no list at all): refused when its host is an internal address or `localhost`
 *    (`InternalAddresses`); a name is allowed, guarded: the gateway connects only when every address
 *    it resolves to is public, checked when each connection is made (DNS rebinding).
 *
 * The same judgement answers a write (400), a call (502), a read (`upstream_refusal`) and the
 * start-up report, so the four never disagree.
 */
import { Either, Schema } from "effect"
import { internalHostKind } from "./InternalAddresses.js"

/** How an upstream may be reached. */
export type UpstreamVerdict =
  /** Wherever it resolves: approved by an admin, or its origin allowed. */
  | { readonly _tag: "Open" }
  /** Only to public addresses, checked when each connection is made. */
  | { readonly _tag: "Guarded" }
  | { readonly _tag: "Refused"; readonly reason: string }

export const OPEN: UpstreamVerdict = { _tag: "Open" }
export const GUARDED: UpstreamVerdict = { _tag: "Guarded" }

/** The origins an admin allowed: deployment-wide, and the profile's own (null or absent: none). */
export interface AllowedOrigins {
  readonly deployment: ReadonlyArray<string>
  readonly profile?: ReadonlyArray<string> | null | undefined
}

const ORIGIN_RULE = "an origin: scheme://host[:port], http or https, without a path, query or credentials"

/** An origin as written (`https://API.example.com:443/`), normalised (`https://api.example.com`); or the problem. */
export const parseOrigin = (text: string): Either.Either<string, string> => {
  if (!/^https?:\/\/[^/?#@\s]+\/?$/i.test(text)) return Either.left(`must be ${ORIGIN_RULE}`)
  try {
    const url = new URL(text)
    return url.protocol === "http:" || url.protocol === "https:" ? Either.right(url.origin) : Either.left(`must be ${ORIGIN_RULE}`)
  } catch {
    return Either.left(`must be ${ORIGIN_RULE}`)
  }
}

/** UPSTREAM_ALLOWED_ORIGINS: comma-separated origins (empty entries ignored), normalised; or the problem. */
export const parseAllowedOrigins = (text: string): Either.Either<ReadonlyArray<string>, string> => {
  const entries = text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  const origins: Array<string> = []
  for (const [index, entry] of entries.entries()) {
    const parsed = parseOrigin(entry)
    if (Either.isLeft(parsed)) {
      return Either.left(`UPSTREAM_ALLOWED_ORIGINS entry ${index + 1} of ${entries.length} ${parsed.left}`)
    }
    if (!origins.includes(parsed.right)) origins.push(parsed.right)
  }
  return Either.right(origins)
}

/** The most origins a profile may list. */
export const MAX_PROFILE_ORIGINS = 50

/** One origin of a profile's `upstream_origins`, as sent. */
export const UpstreamOrigin = Schema.String.pipe(
  Schema.filter((text) => Either.isRight(parseOrigin(text)), { message: () => `must be ${ORIGIN_RULE}` })
)

/** A profile's `upstream_origins` as sent: normalised and without duplicates by `normalisedOrigins`. */
export const UpstreamOrigins = Schema.Array(UpstreamOrigin).pipe(
  Schema.maxItems(MAX_PROFILE_ORIGINS, { message: () => `upstream_origins may list at most ${MAX_PROFILE_ORIGINS} origins` })
).annotations({
  description: "The origins (scheme://host[:port]) this profile's proxy services may target, besides " +
    "UPSTREAM_ALLOWED_ORIGINS. Set only by an admin token."
})

/** Origins as stored: normalised, each once, in the order given; null when none. */
export const normalisedOrigins = (origins: ReadonlyArray<string> | null): ReadonlyArray<string> | null => {
  if (origins === null) return null
  const normalised: Array<string> = []
  for (const origin of origins) {
    const parsed = Either.getOrUndefined(parseOrigin(origin))
    if (parsed !== undefined && !normalised.includes(parsed)) normalised.push(parsed)
  }
  return normalised.length === 0 ? null : normalised
}

const UNLESS_ALLOWED = "which an owner's service may not target unless an admin allows its origin"

/** The verdict on a proxy URL set by a role other than `admin` (see the module's comment). */
export const judgeUpstream = (url: string, allowed: AllowedOrigins): UpstreamVerdict => {
  let target: URL
  try {
    target = new URL(url)
  } catch {
    return { _tag: "Refused", reason: "the URL cannot be parsed" }
  }
  const origin = target.origin
  const profile = allowed.profile ?? []
  if (allowed.deployment.includes(origin) || profile.includes(origin)) return OPEN
  if (allowed.deployment.length > 0 || profile.length > 0) {
    return {
      _tag: "Refused",
      reason: `${origin} is not among the origins this profile's services may target ` +
        "(an admin allows origins with UPSTREAM_ALLOWED_ORIGINS or the profile's upstream_origins)"
    }
  }
  const internal = internalHostKind(target.hostname)
  return internal === undefined ? GUARDED : { _tag: "Refused", reason: `${target.hostname} is ${internal}, ${UNLESS_ALLOWED}` }
}

/**
 * The verdict on a stored proxy URL: open when an admin set it (`approved`), else as an owner's.
 */
export const upstreamStanding = (url: string, approved: boolean, allowed: AllowedOrigins): UpstreamVerdict =>
  approved ? OPEN : judgeUpstream(url, allowed)

/** What a guarded connection answers when a name resolves to an internal address. */
export const resolvedToInternal = (hostname: string, address: string, kind: string) =>
  `${hostname} resolves to ${address}, ${kind}, ${UNLESS_ALLOWED}`
