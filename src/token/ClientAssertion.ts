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
 * Every failure is the same refusal (`invalid_client`). Once the signature verified (the caller holds
 * the key, so nothing is revealed to anyone else), or when the algorithm is not one the key allows,
 * the refusal says which check failed ("Invalid client credentials: the assertion's aud …"): the
 * audience, the lifetime, the algorithm, the replay. A signature that does not verify, or a key that
 * cannot verify, says nothing more. Every reason is logged at debug with the client id; the
 * assertion itself never is.
 */
import { Context, Effect, Either, Layer, Redacted } from "effect"
import type { KeyObject } from "node:crypto"
import { compactVerify, decodeJwt, decodeProtectedHeader } from "jose"
import { AppConfig } from "../config/AppConfig.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import { ALLOWED_ALGORITHMS, importPublicKey, isKeyVerifier, type PublicJwk, verifierKey } from "../domain/KeyCredential.js"
import { ASSERTION_CLOCK_SKEW_SECONDS } from "../domain/Time.js"
import { type AssertionRefusal, type AssertionVerdict, kept, told } from "../domain/AssertionVerdict.js"
import { isFederatedVerifier, verifierIdentity } from "../domain/FederatedCredential.js"
import { FederatedAssertions } from "../federation/FederatedAssertions.js"
import { SeenJtis } from "./SeenJtis.js"
import { IMPORTED_KEYS_MAX, LruCache } from "../keys/ImportedKeys.js"

/** `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/** How far ahead an assertion's `exp` may be. */
export const ASSERTION_MAX_LIFETIME_SECONDS = 300
/** How far ahead of ours a client assertion's `iat` and `nbf` may be (the client's clock running fast). */
export { ASSERTION_CLOCK_SKEW_SECONDS }

/**
 * Whether an assertion may be verified against this credential at all: it is a JWT bearer assertion
 * and the credential is a key, or federated (its workload's token is the assertion: `FederatedAssertions`). A secret credential never accepts an assertion (nor a key credential
 * a secret): the token and revocation endpoints both refuse the client then, before any signature.
 */
export const assertionApplies = (
  assertion: { readonly jwtBearer: boolean },
  verifier: string | undefined
): verifier is string => verifier !== undefined && assertion.jwtBearer && (isKeyVerifier(verifier) || isFederatedVerifier(verifier))

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

export type { AssertionRefusal, AssertionVerdict }

/** The `aud` rule, with what a client most often sends instead named (several libraries send the token endpoint). */
const audienceRefusal = (aud: unknown, issuer: string): AssertionRefusal | undefined => {
  if (aud === issuer || (Array.isArray(aud) && aud.length === 1 && aud[0] === issuer)) return undefined
  const expected = `the assertion's aud must be the issuer identifier "${issuer}"`
  if (aud === undefined) return told(`the assertion has no aud; ${expected}`)
  if (Array.isArray(aud) && aud.length > 1) return told(`${expected}, alone`)
  const named = Array.isArray(aud) ? aud[0] : aud
  if (named === `${issuer}/oauth/token`) return told(`${expected}, not the token endpoint's URL`)
  if (named === `${issuer}/`) return told(`${expected}, without a trailing slash`)
  return told(expected)
}

/** The claims of an assertion whose signature verified, checked in the order a client fixes them. */
const claimsRefusal = (
  payload: Record<string, unknown>,
  clientId: string,
  issuer: string,
  nowMillis: number
): AssertionRefusal | undefined => {
  const now = nowMillis / 1000
  const { exp, iat, iss, jti, nbf, sub } = payload
  if (iss !== clientId) return told("the assertion's iss must be the client id")
  if (sub !== clientId) return told("the assertion's sub must be the client id")
  const audience = audienceRefusal(payload.aud, issuer)
  if (audience !== undefined) return audience
  if (typeof exp !== "number") return told("the assertion has no exp")
  if (exp <= now) return told("the assertion has expired (exp is past)")
  if (exp > now + ASSERTION_MAX_LIFETIME_SECONDS) {
    return told(`the assertion's exp is more than ${ASSERTION_MAX_LIFETIME_SECONDS} seconds ahead`)
  }
  for (const [name, value] of [["iat", iat], ["nbf", nbf]] as const) {
    if (value === undefined) continue
    if (typeof value !== "number") return told(`the assertion's ${name} must be a number`)
    if (value > now + ASSERTION_CLOCK_SKEW_SECONDS) {
      return told(`the assertion's ${name} is more than ${ASSERTION_CLOCK_SKEW_SECONDS} seconds ahead (is the client's clock fast?)`)
    }
  }
  if (typeof jti !== "string" || jti === "") return told("the assertion has no jti")
  return undefined
}

const refused = (refusal: AssertionRefusal): AssertionVerdict => ({ _tag: "Refused", refusal })
const ACCEPTED: AssertionVerdict = { _tag: "Accepted" }

export interface ClientAssertionsShape {
  /**
   * Whether `assertion` authenticates `clientId`, whose credential's verifier is `verifier`, for a
   * service of `profile`; records its `jti` when it does (a key credential's; a federated
   * credential's token is reused by design, `FederatedAssertions`).
   */
  readonly verify: (
    assertion: Redacted.Redacted<string>,
    clientId: string,
    verifier: string,
    nowMillis: number,
    profile: string
  ) => Effect.Effect<boolean, StorageUnavailable>
  /** `verify`, answering why a refused assertion was refused (logged at debug either way). */
  readonly verdict: (
    assertion: Redacted.Redacted<string>,
    clientId: string,
    verifier: string,
    nowMillis: number,
    profile: string
  ) => Effect.Effect<AssertionVerdict, StorageUnavailable>
}

export class ClientAssertions extends Context.Tag("service-auth/ClientAssertions")<ClientAssertions, ClientAssertionsShape>() {
  static readonly layer = Layer.effect(
    ClientAssertions,
    Effect.gen(function*() {
      const { issuer } = yield* AppConfig
      const seen = yield* SeenJtis
      const federated = yield* FederatedAssertions
      const keyOf = keyCache()

      /** The verified claims, or why there are none. */
      const checked = (
        assertion: string,
        clientId: string,
        verifier: string,
        nowMillis: number
      ): Effect.Effect<{ readonly jti: string; readonly exp: number } | AssertionRefusal> =>
        Effect.promise(async () => {
          const entry = keyOf(verifier)
          if (entry === undefined) return kept("the credential's stored key cannot verify assertions")
          const algorithms: ReadonlyArray<string> = ALLOWED_ALGORITHMS[entry.jwk.kty]
          let alg: unknown
          try {
            alg = decodeProtectedHeader(assertion).alg
          } catch {
            return kept("the assertion is not a JWT")
          }
          if (typeof alg !== "string" || !algorithms.includes(alg)) {
            return told(`the assertion's alg ${JSON.stringify(alg ?? null)} is not allowed for this key (${algorithms.join(", ")})`)
          }
          let payload: unknown
          try {
            const verified = await compactVerify(assertion, entry.key, { algorithms: [...algorithms] })
            payload = JSON.parse(new TextDecoder().decode(verified.payload))
          } catch {
            return kept("the assertion's signature does not verify with the credential's key")
          }
          if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
            return told("the assertion's payload is not a JSON object")
          }
          const claims = payload as Record<string, unknown>
          return claimsRefusal(claims, clientId, issuer, nowMillis) ?? { jti: claims.jti as string, exp: claims.exp as number }
        })

      /** A key credential's assertion: its claims, then its `jti` never seen before. */
      const keyVerdict = (assertion: string, clientId: string, verifier: string, nowMillis: number) =>
        Effect.suspend(() => checked(assertion, clientId, verifier, nowMillis)).pipe(
          Effect.flatMap((accepted) =>
            "reason" in accepted
              ? Effect.succeed(refused(accepted))
              : Effect.map(
                seen.claim(`client_assertion:${clientId}`, accepted.jti, accepted.exp * 1000, nowMillis),
                (fresh) => fresh ? ACCEPTED : refused(told("the assertion's jti was used before (each assertion needs a new jti)"))
              )
          )
        )

      const verdict: ClientAssertionsShape["verdict"] = (assertion, clientId, verifier, nowMillis, profile) => {
        const identity = verifierIdentity(verifier)
        const outcome: Effect.Effect<AssertionVerdict, StorageUnavailable> = identity !== undefined
          ? federated.verdict(Redacted.value(assertion), identity, profile, nowMillis)
          : isFederatedVerifier(verifier)
          ? Effect.succeed(refused(kept("the credential's stored identity cannot verify assertions")))
          : keyVerdict(Redacted.value(assertion), clientId, verifier, nowMillis)
        return outcome.pipe(
          Effect.tap((outcome) =>
            outcome._tag === "Refused"
              ? Effect.logDebug(`client assertion of ${clientId} refused: ${outcome.refusal.reason}`)
              : Effect.void
          )
        )
      }

      return ClientAssertions.of({
        verify: (assertion, clientId, verifier, nowMillis, profile) =>
          Effect.map(verdict(assertion, clientId, verifier, nowMillis, profile), (outcome) => outcome._tag === "Accepted"),
        verdict
      })
    })
  )
}
