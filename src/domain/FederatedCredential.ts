/**
 * Federated credentials: a credential whose client proves itself with a token a trusted issuer
 * signed for the workload (a Kubernetes projected service-account token, a GitHub Actions OIDC
 * token, a SPIFFE JWT-SVID), sent as a JWT client assertion (RFC 7523 §2.2) with `client_id`
 * naming the credential. Nothing secret is created or stored.
 *
 * Its verifier (the `secret_hash` column, as a key credential's public key is) is `fed:` followed by
 * the identity as JSON: the trusted issuer's name, the exact `sub`, and exact values of other claims.
 * A secret never matches it, and the catalogue, its cache, export and import carry it unchanged.
 */
import { Schema } from "effect"
import { FEDERATED_CLAIM_TEXT_MAX, FEDERATED_CLAIMS_MAX, TRUSTED_ISSUER_NAME_PATTERN_SOURCE } from "./Limits.js"

export const TRUSTED_ISSUER_NAME_PATTERN = new RegExp(`^${TRUSTED_ISSUER_NAME_PATTERN_SOURCE}$`)
export const TRUSTED_ISSUER_NAME_RULE = "1-64 letters, digits, '.', '_' or '-'"

/** A trusted issuer's name: how federated credentials name it (`TrustedIssuers`). */
export const TrustedIssuerName = Schema.String.pipe(
  Schema.pattern(TRUSTED_ISSUER_NAME_PATTERN, { message: () => `name must be ${TRUSTED_ISSUER_NAME_RULE}` })
).annotations({
  description: `The trusted issuer's name (${TRUSTED_ISSUER_NAME_RULE}): how federated credentials name it.`,
  jsonSchema: { type: "string", pattern: TRUSTED_ISSUER_NAME_PATTERN.source }
})

/** Claims the token endpoint checks itself: a credential may not require values for them. */
const RESERVED_CLAIMS = new Set(["iss", "sub", "aud", "exp", "nbf", "iat", "jti"])

const ClaimText = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(FEDERATED_CLAIM_TEXT_MAX))

const Claims = Schema.Record({ key: Schema.String, value: ClaimText }).pipe(
  Schema.filter((claims) => {
    const names = Object.keys(claims)
    if (names.length > FEDERATED_CLAIMS_MAX) return `claims may name at most ${FEDERATED_CLAIMS_MAX} claims`
    const reserved = names.find((name) => RESERVED_CLAIMS.has(name))
    if (reserved !== undefined) return `claims may not name ${reserved} (checked by the token endpoint itself)`
    return names.every((name) => name.length > 0 && name.length <= 128) || "claim names must be 1-128 characters"
  })
).annotations({
  description: "Other claims the token must carry, each with exactly this string value (GitHub's repository, " +
    "environment, …); not iss, sub, aud, exp, nbf, iat or jti."
})

/** Who a federated credential accepts: a trusted issuer's token with this `sub` and these claims. */
export const FederatedIdentity = Schema.Struct({
  issuer: TrustedIssuerName.annotations({ description: "The trusted issuer's name (POST /admin/trusted-issuers)." }),
  subject: ClaimText.annotations({
    description:
      "The token's sub, exactly: system:serviceaccount:<namespace>:<name>, repo:<owner>/<repo>:environment:<name>, spiffe://<trust-domain>/<path>."
  }),
  claims: Schema.optional(Claims)
}).annotations({ identifier: "FederatedIdentity" })
export type FederatedIdentity = typeof FederatedIdentity.Type

const FEDERATED_VERIFIER_PREFIX = "fed:"

/** The verifier stored for a federated credential: its members in one order, so one identity is one text. */
export const federatedVerifier = (identity: FederatedIdentity): string => {
  const claims = identity.claims === undefined || Object.keys(identity.claims).length === 0
    ? undefined
    : Object.fromEntries(Object.entries(identity.claims).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  return `${FEDERATED_VERIFIER_PREFIX}${
    JSON.stringify({ issuer: identity.issuer, subject: identity.subject, ...(claims === undefined ? {} : { claims }) })
  }`
}

/** Whether a stored verifier is a federated credential's. */
export const isFederatedVerifier = (verifier: string): boolean => verifier.startsWith(FEDERATED_VERIFIER_PREFIX)

const decodeIdentity = Schema.decodeUnknownOption(Schema.parseJson(FederatedIdentity))

/** The identity of a federated credential's verifier; undefined for any other verifier (or one that does not decode). */
export const verifierIdentity = (verifier: string): FederatedIdentity | undefined => {
  if (!isFederatedVerifier(verifier)) return undefined
  const decoded = decodeIdentity(verifier.slice(FEDERATED_VERIFIER_PREFIX.length))
  return decoded._tag === "Some" ? decoded.value : undefined
}
