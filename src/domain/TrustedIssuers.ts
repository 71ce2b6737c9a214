/**
 * Trusted issuers (workload identity federation): an OIDC issuer whose tokens a federated credential
 * accepts in place of a secret, as an admin registers it. Its keys come from its discovery document
 * (`{issuer}/.well-known/openid-configuration`, then `jwks_uri`) or from a JWKS given inline (an
 * issuer this server cannot reach: a private cluster's `kubectl get --raw /openid/v1/jwks`).
 *
 * An issuer URL is `https:`; plain `http:` only for a loopback host (127.0.0.0/8, ::1, localhost) and
 * only when the issuer says `allow_insecure_loopback` (a test issuer, a sidecar on the same host).
 */
import { Schema } from "effect"
import { ProfileId } from "./Identifiers.js"
import { Timestamp } from "./Models.js"
import { TrustedIssuerName } from "./FederatedCredential.js"
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, FEDERATION_ALGORITHMS, MAX_TOKEN_LIFETIME_LIMIT_SECONDS } from "./Limits.js"

/** The most keys an inline or fetched JWKS may hold. */
export const JWKS_MAX_KEYS = 100

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i

/** Whether `host` (a URL's hostname) is a loopback host. */
export const isLoopbackUrlHost = (host: string): boolean => LOOPBACK_HOST.test(host)

/**
 * Why `url` may not be fetched for an issuer's keys (`field` names it in the message), or undefined:
 * `https:`, or `http:` to a loopback host when `allowInsecureLoopback`; no credentials, no fragment.
 */
export const issuerUrlProblem = (url: string, allowInsecureLoopback: boolean, field: string): string | undefined => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return `${field} must be an absolute URL`
  }
  if (parsed.username !== "" || parsed.password !== "") return `${field} must not carry credentials`
  if (parsed.hash !== "" || url.includes("#")) return `${field} must not have a fragment`
  if (parsed.protocol === "https:") return undefined
  if (parsed.protocol === "http:" && isLoopbackUrlHost(parsed.hostname)) {
    return allowInsecureLoopback ? undefined : `${field} may be http: only with allow_insecure_loopback (loopback hosts only)`
  }
  return `${field} must be an https: URL (http: only for a loopback host with allow_insecure_loopback)`
}

const IssuerUrl = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)).annotations({
  description: "The issuer identifier: its tokens' `iss`, exactly (https:, or http: on loopback with allow_insecure_loopback)."
})

/** A JWKS (RFC 7517 §5) as given: checked key by key by the handler (`parsePublicJwk`). */
export const InlineJwks = Schema.Struct({
  keys: Schema.Array(
    Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
      jsonSchema: { type: "object", additionalProperties: true, description: "A public JWK (RFC 7517)." }
    })
  ).pipe(
    Schema.minItems(1),
    Schema.maxItems(JWKS_MAX_KEYS)
  )
}).annotations({
  identifier: "InlineJwks",
  description: "The issuer's public keys as a JWK Set (RSA, EC P-256 or Ed25519 public keys), for an issuer this server " +
    "cannot reach; absent: fetched through the issuer's discovery document."
})
export type InlineJwks = typeof InlineJwks.Type

const Algorithms = Schema.Array(Schema.Literal(...FEDERATION_ALGORITHMS)).pipe(Schema.minItems(1)).annotations({
  description: "The signing algorithms accepted (RS256, ES256, EdDSA; never none or HMAC). Default: all three."
})

const MaxTokenLifetime = Schema.Int.pipe(Schema.between(1, MAX_TOKEN_LIFETIME_LIMIT_SECONDS)).annotations({
  description: "The longest token lifetime accepted, in seconds (exp - iat, or exp - now without iat); " +
    `1-${MAX_TOKEN_LIFETIME_LIMIT_SECONDS}, default ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS}.`
})

/** What an admin sends to register (or replace) a trusted issuer. */
export const TrustedIssuerInput = Schema.Struct({
  issuer: IssuerUrl,
  jwks: Schema.optional(InlineJwks),
  audience: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048))).annotations({
    description:
      "The audience the issuer's tokens must carry for this server (one of their `aud`). Default: this server's issuer identifier."
  }),
  algorithms: Schema.optional(Algorithms),
  max_token_lifetime_seconds: Schema.optional(MaxTokenLifetime),
  profiles: Schema.Array(ProfileId).annotations({
    description: "The profiles whose services may have federated credentials of this issuer (and get tokens with them)."
  }),
  allow_insecure_loopback: Schema.optional(Schema.Boolean).annotations({
    description: "true: the issuer and its jwks_uri may be plain http: on a loopback host (for tests and same-host issuers)."
  })
}).annotations({ identifier: "TrustedIssuerInput", parseOptions: { onExcessProperty: "error" } })
export type TrustedIssuerInput = typeof TrustedIssuerInput.Type

/** What is stored of an issuer beside its name and URL (the `settings` column), every default applied. */
export const TrustedIssuerSettings = Schema.Struct({
  jwks: Schema.NullOr(InlineJwks),
  audience: Schema.String,
  algorithms: Schema.Array(Schema.Literal(...FEDERATION_ALGORITHMS)),
  max_token_lifetime_seconds: Schema.Int,
  profiles: Schema.Array(ProfileId),
  allow_insecure_loopback: Schema.Boolean
})
export type TrustedIssuerSettings = typeof TrustedIssuerSettings.Type

/** A trusted issuer as the admin API answers it. */
export const TrustedIssuerDocument = Schema.Struct({
  name: TrustedIssuerName,
  issuer: Schema.String,
  jwks: Schema.optional(InlineJwks),
  audience: Schema.String,
  algorithms: Schema.Array(Schema.Literal(...FEDERATION_ALGORITHMS)),
  max_token_lifetime_seconds: Schema.Int,
  profiles: Schema.Array(ProfileId),
  allow_insecure_loopback: Schema.Boolean,
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "TrustedIssuer" })
export type TrustedIssuerDocument = typeof TrustedIssuerDocument.Type

/** A stored trusted issuer. */
export interface TrustedIssuer extends TrustedIssuerSettings {
  readonly name: string
  readonly issuer: string
  readonly created_at: Date
  readonly updated_at: Date
}

export const TrustedIssuerList = Schema.Struct({ issuers: Schema.Array(TrustedIssuerDocument) }).annotations({
  identifier: "TrustedIssuerList"
})

/**
 * A trusted issuer as a profile's tokens see it: what its workloads need to get tokens (the issuer,
 * the audience, the algorithms, the longest lifetime), not its keys or the other profiles it allows.
 */
export const ProfileTrustedIssuer = Schema.Struct({
  name: TrustedIssuerName,
  issuer: Schema.String,
  audience: Schema.String.annotations({ description: "The audience its tokens must carry for this server (one of their aud)." }),
  algorithms: Schema.Array(Schema.Literal(...FEDERATION_ALGORITHMS)),
  max_token_lifetime_seconds: Schema.Int
}).annotations({ identifier: "ProfileTrustedIssuer" })
export type ProfileTrustedIssuer = typeof ProfileTrustedIssuer.Type

export const ProfileTrustedIssuerList = Schema.Struct({ issuers: Schema.Array(ProfileTrustedIssuer) }).annotations({
  identifier: "ProfileTrustedIssuerList"
})

/** What a profile's tokens are shown of an issuer that allows the profile. */
export const profileIssuerDocument = (issuer: TrustedIssuer): ProfileTrustedIssuer => ({
  name: issuer.name,
  issuer: issuer.issuer,
  audience: issuer.audience,
  algorithms: issuer.algorithms,
  max_token_lifetime_seconds: issuer.max_token_lifetime_seconds
})

/** The API's document of a stored issuer. */
export const issuerDocument = (issuer: TrustedIssuer): TrustedIssuerDocument => {
  const { jwks, ...rest } = issuer
  return jwks === null ? rest : { ...rest, jwks }
}
