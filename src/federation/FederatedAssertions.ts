/**
 * A federated credential's client assertion (RFC 7523 §2.2 with `client_id`): the workload's own
 * token from a trusted issuer (a Kubernetes projected service-account token, a GitHub Actions OIDC
 * token, a SPIFFE JWT-SVID). Accepted only when
 *
 * - the credential's trusted issuer is registered, its `iss` is the issuer's URL exactly, and it is
 *   signed with one of the issuer's algorithms (RS256, ES256, EdDSA; never `none` or HMAC) by one
 *   of its keys (`IssuerKeys`: one refetch for an unknown key);
 * - the issuer is allowed for the service's profile;
 * - `aud` is, or includes, the issuer's configured audience;
 * - `exp` is in the future; `iat` and `nbf` at most `ASSERTION_CLOCK_SKEW_SECONDS` ahead; its
 *   lifetime (`exp - iat`, or `exp - now` without `iat`) at most the issuer's maximum;
 * - `sub`, and each claim the credential names, are exactly the credential's.
 *
 * Its `jti` is not remembered: a workload's token is reused by design until it expires (a kubelet
 * refreshes its token hourly, not per request), so replay protection is its short lifetime and the
 * issuer's audience, as with Azure's and Google's federation.
 *
 * Every failure is the same refusal (`invalid_client`), written as a key credential's is
 * (`ClientAssertion`): once the signature verified (the caller holds a token of the issuer), or when
 * the algorithm is refused, the refusal says which check failed, never the expected `sub` or claim
 * values; before that (an issuer unknown, keys unreachable, a tampered token) it says nothing more.
 */
import { Context, Effect, Either, Layer, Option } from "effect"
import { compactVerify, type CompactVerifyGetKey, decodeJwt, decodeProtectedHeader } from "jose"
import { type AssertionRefusal, type AssertionVerdict, kept, told } from "../domain/AssertionVerdict.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import type { FederatedIdentity } from "../domain/FederatedCredential.js"
import { ASSERTION_CLOCK_SKEW_SECONDS } from "../domain/Time.js"
import type { TrustedIssuer } from "../domain/TrustedIssuers.js"
import { type IssuerKeySet, IssuerKeys, UNKNOWN_KID_REFETCH_SECONDS } from "./IssuerKeys.js"
import { TrustedIssuerStore } from "./TrustedIssuerStore.js"

/** The claims of a token whose signature verified, checked against the issuer and the credential. */
export const federatedClaimsRefusal = (
  claims: Record<string, unknown>,
  issuer: TrustedIssuer,
  identity: FederatedIdentity,
  profile: string,
  nowMillis: number
): AssertionRefusal | undefined => {
  const now = nowMillis / 1000
  const { aud, exp, iat, nbf, sub } = claims
  if (!issuer.profiles.includes(profile as never)) {
    return told(`the trusted issuer ${issuer.name} is not allowed for profile ${profile}`)
  }
  const audiences = Array.isArray(aud) ? aud : [aud]
  if (!audiences.includes(issuer.audience)) return told(`the token's aud must include "${issuer.audience}"`)
  if (typeof exp !== "number") return told("the token has no exp")
  if (exp <= now) return told("the token has expired (exp is past)")
  for (const [name, value] of [["iat", iat], ["nbf", nbf]] as const) {
    if (value === undefined) continue
    if (typeof value !== "number") return told(`the token's ${name} must be a number`)
    if (value > now + ASSERTION_CLOCK_SKEW_SECONDS) {
      return told(`the token is not valid yet (its ${name} is more than ${ASSERTION_CLOCK_SKEW_SECONDS} seconds ahead)`)
    }
  }
  const lifetime = exp - (typeof iat === "number" ? iat : now)
  if (lifetime > issuer.max_token_lifetime_seconds) {
    return told(`the token's lifetime is above the trusted issuer's limit of ${issuer.max_token_lifetime_seconds} seconds`)
  }
  if (sub !== identity.subject) return told("the token's sub is not the credential's subject")
  for (const [name, value] of Object.entries(identity.claims ?? {})) {
    if (claims[name] !== value) return told(`the token's ${name} claim is not the credential's value`)
  }
  return undefined
}

type Verified = { readonly payload: Record<string, unknown> } | "unknown key" | "bad signature"

const verifyWith = async (token: string, keys: IssuerKeySet, algorithms: ReadonlyArray<string>): Promise<Verified> => {
  try {
    const verified = await compactVerify(token, keys.getKey as CompactVerifyGetKey, { algorithms: [...algorithms] })
    const payload: unknown = JSON.parse(new TextDecoder().decode(verified.payload))
    return typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? { payload: payload as Record<string, unknown> }
      : "bad signature"
  } catch (error) {
    const code = (error as { code?: unknown }).code
    return code === "ERR_JWKS_NO_MATCHING_KEY" ? "unknown key" : "bad signature"
  }
}

export interface FederatedAssertionsShape {
  /** Whether `assertion` is a token the credential of `identity` accepts, for a service of `profile`; why not when refused. */
  readonly verdict: (
    assertion: string,
    identity: FederatedIdentity,
    profile: string,
    nowMillis: number
  ) => Effect.Effect<AssertionVerdict, StorageUnavailable>
}

export class FederatedAssertions extends Context.Tag("service-auth/FederatedAssertions")<
  FederatedAssertions,
  FederatedAssertionsShape
>() {
  static readonly layer = Layer.effect(
    FederatedAssertions,
    Effect.gen(function*() {
      const store = yield* TrustedIssuerStore
      const issuerKeys = yield* IssuerKeys

      const checked = (assertion: string, identity: FederatedIdentity, profile: string, nowMillis: number) =>
        Effect.gen(function*() {
          const found = yield* store.find(identity.issuer)
          if (Option.isNone(found)) return kept(`the credential's trusted issuer ${identity.issuer} is not registered`)
          const issuer = found.value
          let alg: unknown
          let iss: unknown
          try {
            alg = decodeProtectedHeader(assertion).alg
            iss = decodeJwt(assertion).iss
          } catch {
            return kept("the assertion is not a JWT")
          }
          if (typeof alg !== "string" || !issuer.algorithms.includes(alg as never)) {
            return told(
              `the token's alg ${JSON.stringify(alg ?? null)} is not accepted for this trusted issuer (${issuer.algorithms.join(", ")})`
            )
          }
          if (iss !== issuer.issuer) return kept(`the token's iss is not the trusted issuer ${issuer.name}'s`)
          const keys = yield* issuerKeys.keysFor(issuer, nowMillis)
          if (Either.isLeft(keys)) return kept(keys.left)
          let verified = yield* Effect.promise(() => verifyWith(assertion, keys.right, issuer.algorithms))
          if (verified === "unknown key") {
            const refetched = yield* issuerKeys.refetchForUnknownKey(issuer, nowMillis)
            if (refetched === undefined) {
              return kept(`no key of the trusted issuer matches the token (keys refetched less than ${UNKNOWN_KID_REFETCH_SECONDS} s ago)`)
            }
            if (Either.isLeft(refetched)) return kept(refetched.left)
            verified = yield* Effect.promise(() => verifyWith(assertion, refetched.right, issuer.algorithms))
            if (verified === "unknown key") return kept("no key of the trusted issuer matches the token, after one refetch")
          }
          if (verified === "bad signature") return kept("the token's signature does not verify with the trusted issuer's keys")
          return federatedClaimsRefusal(verified.payload, issuer, identity, profile, nowMillis)
        })

      return FederatedAssertions.of({
        verdict: (assertion, identity, profile, nowMillis) =>
          Effect.map(
            checked(assertion, identity, profile, nowMillis),
            (refusal): AssertionVerdict => refusal === undefined ? { _tag: "Accepted" } : { _tag: "Refused", refusal }
          )
      })
    })
  )
}
