/**
 * "Is this verified token acceptable now?", answered once. The gateway (`decideServiceCall`),
 * introspection and revocation verify a token's signature, time and key (`TokenService.verifyAt`),
 * read its service's route with the token's client id (`CatalogueLookup`), then ask
 * `tokenStanding`; a rule about a token or its credential (a revocation, an expiry, a deletion) is
 * written here and holds at each of them. What binds the token is `boundKey`: a DPoP-bound token
 * (RFC 9449) carries the thumbprint of its key, which the gateway checks a proof against and
 * introspection reports as `cnf.jkt`.
 *
 * Pure and allocation-free: the gateway's fast path calls it on every call.
 */
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { ServiceRoute } from "../catalogue/CatalogueLookup.js"
import type { AccessTokenClaims } from "./TokenService.js"

/**
 * - `acceptable`: the gateway lets the token through (a DPoP-bound one with its proof);
 * - `other-service`: issued for another service than the route's;
 * - `revoked`: its credential is deleted, or its client revoked it;
 * - `credential-expired`: its credential reached its `expires_at` (nothing was revoked);
 * - `not-oauth`: its service no longer takes tokens (the gateway then asks for none).
 */
export type TokenStanding = "acceptable" | "other-service" | "revoked" | "credential-expired" | "not-oauth"

export const tokenStanding = (
  claims: AccessTokenClaims,
  address: ServiceAddress,
  route: ServiceRoute,
  nowMillis: number,
  isForService: (claims: AccessTokenClaims, address: ServiceAddress) => boolean
): TokenStanding => {
  if (route.authType !== "oauth") return "not-oauth"
  if (!isForService(claims, address)) return "other-service"
  // An expired credential is refused as a deleted one, on every instance at once: by the clock.
  const expiresAt = route.credentialExpiresAt
  if (!route.credentialLive) return "revoked"
  if (expiresAt != null && nowMillis >= expiresAt) return "credential-expired"
  // Revoked by its client (RFC 7009): read with the route, an O(1) lookup when there are any.
  if (route.revokedTokens?.has(claims.jti) === true) return "revoked"
  return "acceptable"
}

/** The thumbprint of the key a DPoP-bound token is bound to (RFC 9449 §6.1); undefined for a Bearer token. */
export const boundKey = (claims: AccessTokenClaims): string | undefined => claims.cnf?.jkt
