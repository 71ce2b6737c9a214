/**
 * `private_key_jwt` (RFC 7523 §2.2, §3; OpenID Connect Core §9): a key credential's client proves
 * itself with a JWT it signed. Accepted only when
 *
 * - it is signed by the credential's key with an algorithm allowed for that key type (`RS256`,
 *   `PS256`, `ES256`, `EdDSA`; never `none` or HMAC);
 * - `iss` and `sub` are both the client id;
 * - `aud` is the issuer identifier, as a string or a one-element array, and nothing else
 *   (draft-ietf-oauth-rfc7523bis: not the token endpoint's URL);
 * - `exp` is in the future and at most 5 minutes ahead; `iat` and `nbf` at most 10 s ahead;
 * - `jti` was never seen for that client until its `exp` (`SeenJtis`: on every instance).
 *
 * Every failure is the same refusal (`invalid_client`); which check failed is never said. The
 * assertion itself is never logged.
 */
import { Context, Effect, Either, Layer, Redacted } from "effect"
import type { KeyObject } from "node:crypto"
import { decodeJwt, jwtVerify } from "jose"
import { AppConfig } from "../config/AppConfig.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { ALLOWED_ALGORITHMS, importPublicKey, isKeyVerifier, type PublicJwk, verifierKey } from "../domain/KeyCredential.js"
import { SeenJtis } from "../storage/SeenJtis.js"
import { IMPORTED_KEYS_MAX, LruCache } from "./ImportedKeys.js"

/** `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/** How far ahead an assertion's `exp` may be. */
export const ASSERTION_MAX_LIFETIME_SECONDS = 300
/** How far ahead `iat` and `nbf` may be (the client's clock running fast). */
export const CLOCK_SKEW_SECONDS = 10

/**
 * Whether an assertion may be verified against this credential at all: it is a JWT bearer assertion
 * and the credential is a key. A secret credential never accepts an assertion (nor a key credential
 * a secret): the token and revocation endpoints both refuse the client then, before any signature.
 */
export const assertionApplies = (
  assertion: { readonly jwtBearer: boolean },
  verifier: string | undefined
): verifier is string => verifier !== undefined && assertion.jwtBearer && isKeyVerifier(verifier)

/**
 * The client id an assertion claims (its `iss`), read without verifying anything: only to find the
 * credential whose key will verify it. Undefined when it is not a JWT with a string `iss`.
 */
export const assertedClientId = (assertion: string): string | undefined => {
  try {
    const iss = decodeJwt(assertion).iss
    return typeof iss === "string" ? iss : undefined
  } catch {
    return undefined
  }
}

/**
 * A credential's public key, imported once per verifier (bounded: the least recently used goes
 * first). Keeping the same `KeyObject` also keeps jose's WebCrypto form of it; each assertion's
 * signature is still verified. A stored key is checked again as a new one would be (`verifierKey`,
 * `importPublicKey`): one that does not pass, a weak key stored before the checks or written to the
 * database by other means, verifies nothing.
 */
export const keyCache = (capacity: number = IMPORTED_KEYS_MAX) => {
  const keys = new LruCache<string, { readonly jwk: PublicJwk; readonly key: KeyObject }>(capacity)
  return (verifier: string) => {
    const cached = keys.get(verifier)
    if (cached !== undefined) return cached
    const jwk = verifierKey(verifier)
    if (jwk === undefined) return undefined
    const imported = importPublicKey(jwk)
    if (Either.isLeft(imported)) return undefined
    const entry = { jwk, key: imported.right }
    keys.set(verifier, entry)
    return entry
  }
}

const audienceIs = (aud: unknown, issuer: string) =>
  aud === issuer || (Array.isArray(aud) && aud.length === 1 && aud[0] === issuer)

export interface ClientAssertionsShape {
  /** Whether `assertion` authenticates `clientId`, whose credential's verifier is `verifier`; records its `jti` when it does. */
  readonly verify: (
    assertion: Redacted.Redacted<string>,
    clientId: string,
    verifier: string,
    nowMillis: number
  ) => Effect.Effect<boolean, StorageUnavailable>
}

export class ClientAssertions extends Context.Tag("service-auth/ClientAssertions")<ClientAssertions, ClientAssertionsShape>() {
  static readonly layer = Layer.effect(
    ClientAssertions,
    Effect.gen(function*() {
      const { issuer } = yield* AppConfig
      const seen = yield* SeenJtis
      const keyOf = keyCache()

      const checked = (assertion: string, clientId: string, verifier: string, nowMillis: number) =>
        Effect.tryPromise(async () => {
          const entry = keyOf(verifier)
          if (entry === undefined) return undefined
          const { payload } = await jwtVerify(assertion, entry.key, {
            algorithms: [...ALLOWED_ALGORITHMS[entry.jwk.kty]],
            issuer: clientId,
            subject: clientId,
            currentDate: new Date(nowMillis),
            clockTolerance: CLOCK_SKEW_SECONDS,
            requiredClaims: ["iss", "sub", "aud", "exp", "jti"]
          })
          const now = nowMillis / 1000
          const { exp, iat, jti } = payload
          if (typeof exp !== "number" || exp <= now || exp > now + ASSERTION_MAX_LIFETIME_SECONDS) return undefined
          if (iat !== undefined && iat > now + CLOCK_SKEW_SECONDS) return undefined
          if (!audienceIs(payload.aud, issuer)) return undefined
          if (typeof jti !== "string" || jti === "") return undefined
          return { jti, exp }
        }).pipe(Effect.orElseSucceed(() => undefined))

      return ClientAssertions.of({
        verify: (assertion, clientId, verifier, nowMillis) =>
          Effect.flatMap(
            Effect.suspend(() => checked(Redacted.value(assertion), clientId, verifier, nowMillis)),
            (accepted) =>
              accepted === undefined
                ? Effect.succeed(false)
                : seen.claim(`client_assertion:${clientId}`, accepted.jti, accepted.exp * 1000, nowMillis)
          )
      })
    })
  )
}
