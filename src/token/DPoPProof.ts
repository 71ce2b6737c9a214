/**
 * DPoP proofs (RFC 9449 §4.3): a JWT the client signs for one request with a key it holds, whose
 * public half travels in the proof's header. Checked here, for the token endpoint (which binds the
 * token to the key's thumbprint, `cnf.jkt`) and the gateway (which checks the key is the token's and
 * `ath` its hash):
 *
 * - compact JWS, `typ` `dpop+jwt`, `alg` allowed for the `jwk`'s type (RS256/PS256, ES256, EdDSA;
 *   never `none` or HMAC), `jwk` a public key (no private members), signature valid under it;
 * - `htm` the request's method, `htu` its URL under ISSUER (no query, no fragment);
 * - `iat` within 60 s of now, either way; `jti` present and not seen for that key in that window
 *   (`SeenJtis`: on every instance);
 * - `ath`, when a token is presented, the base64url SHA-256 of the token.
 *
 * A proof is bound to one request: never cached, one signature verification each. Never logged.
 * Only the import of its key is kept (`ImportedKeys`: a client signs every proof with the same key),
 * after the same checks of the `jwk`'s members as `parsePublicJwk` makes.
 */
import { Effect, Either } from "effect"
import { timingSafeEqual } from "node:crypto"
import { compactVerify, decodeProtectedHeader } from "jose"
import type { StorageUnavailable } from "../domain/Errors.js"
import { ALLOWED_ALGORITHMS, publicJwkMembers } from "../domain/KeyCredential.js"
import { sha256Base64url } from "../domain/Sha256.js"
import type { SeenJtisShape } from "./SeenJtis.js"
import { type ImportedKeys, importedKeys } from "../keys/ImportedKeys.js"

/** The `DPoP` header as sent: repeated, its values joined (then never a valid proof). */
export const dpopHeader = (header: string | ReadonlyArray<string> | undefined): string | undefined =>
  header === undefined || typeof header === "string" ? header : header.join(", ")

/** How far a proof's `iat` may be from now, either way. */
export const PROOF_WINDOW_SECONDS = 60
/** Proofs larger than this are refused unread. */
const MAX_PROOF_LENGTH = 8192

export interface ProofRequest {
  readonly method: string
  /** The request's URL under ISSUER, without query or fragment. */
  readonly url: string
  readonly nowMillis: number
  /** The access token presented with the proof (the gateway), whose hash `ath` must be. */
  readonly accessToken?: string
}

/** A proof's outcome: the key's thumbprint, or why it is refused (a description for the answer). */
export type ProofOutcome = { readonly jkt: string } | { readonly refused: string }

const refused = (description: string): ProofOutcome => ({ refused: description })

const sameText = (a: string, b: string) => {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

/** `htu` compared as RFC 9449 §4.3 says: without query and fragment. */
const withoutQuery = (url: string) => url.replace(/[?#].*$/, "")

/** Everything but the jti: structure, header, signature and claims. */
const checkProof = async (
  proofKeys: ImportedKeys,
  proof: string,
  request: ProofRequest
): Promise<ProofOutcome & { readonly jti?: string }> => {
  if (proof.length > MAX_PROOF_LENGTH || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(proof)) {
    return refused("The DPoP proof is not a JWT")
  }
  let header: ReturnType<typeof decodeProtectedHeader>
  try {
    header = decodeProtectedHeader(proof)
  } catch {
    return refused("The DPoP proof is not a JWT")
  }
  if (header.typ !== "dpop+jwt") return refused("The DPoP proof's typ must be dpop+jwt")
  const jwk = Either.flatMap(
    publicJwkMembers(header.jwk),
    ({ members }) => Either.map(proofKeys.of(members), (imported) => ({ kty: members.kty, ...imported }))
  )
  if (jwk._tag === "Left") return refused("The DPoP proof's jwk must be a public RSA, EC P-256 or Ed25519 key")
  const allowed = ALLOWED_ALGORITHMS[jwk.right.kty]
  if (typeof header.alg !== "string" || !allowed.includes(header.alg)) return refused("The DPoP proof's alg is not allowed")
  let payload: Record<string, unknown>
  try {
    // The one signature verification of this proof (the key's import is kept, never a verification).
    const verified = await compactVerify(proof, jwk.right.key, { algorithms: [...allowed] })
    payload = JSON.parse(Buffer.from(verified.payload).toString("utf8"))
  } catch {
    return refused("The DPoP proof's signature is invalid")
  }
  if (typeof payload !== "object" || payload === null) return refused("The DPoP proof's claims are invalid")
  if (payload.htm !== request.method) return refused("The DPoP proof's htm is not this request's method")
  if (typeof payload.htu !== "string" || withoutQuery(payload.htu) !== request.url) {
    return refused("The DPoP proof's htu is not this request's URL")
  }
  const now = request.nowMillis / 1000
  if (typeof payload.iat !== "number" || Math.abs(payload.iat - now) > PROOF_WINDOW_SECONDS) {
    return refused("The DPoP proof's iat is not within 60 seconds of now")
  }
  if (typeof payload.jti !== "string" || payload.jti === "" || payload.jti.length > 256) {
    return refused("The DPoP proof has no jti")
  }
  if (request.accessToken !== undefined) {
    if (typeof payload.ath !== "string" || !sameText(payload.ath, sha256Base64url(request.accessToken))) {
      return refused("The DPoP proof's ath is not the access token's hash")
    }
  }
  return { jkt: jwk.right.thumbprint, jti: payload.jti }
}

/**
 * The proof check of one layer (the token endpoint's, the gateway's): checks `proof` for `request`
 * and records its jti (a replay is refused). The keys it imports are its own, released with it.
 */
export const makeProofVerifier = (seen: SeenJtisShape) => {
  const proofKeys = importedKeys()
  return (proof: string, request: ProofRequest): Effect.Effect<ProofOutcome, StorageUnavailable> =>
    Effect.flatMap(Effect.promise(() => checkProof(proofKeys, proof, request)), (outcome) => {
      if (!("jkt" in outcome) || outcome.jti === undefined) return Effect.succeed(outcome)
      // Seen within the window, either way of now: kept for twice the window.
      const until = request.nowMillis + 2 * PROOF_WINDOW_SECONDS * 1000
      return Effect.map(
        seen.claim(`dpop:${outcome.jkt}`, outcome.jti, until, request.nowMillis),
        (fresh): ProofOutcome => fresh ? { jkt: outcome.jkt } : refused("The DPoP proof's jti was used before")
      )
    })
}
