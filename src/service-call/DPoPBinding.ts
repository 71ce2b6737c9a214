/**
 * DPoP-bound tokens at the gateway (RFC 9449 §7): a token carrying `cnf.jkt` is accepted only as
 * `Authorization: DPoP <token>` with a proof (`DPoPProof`) by the key of that thumbprint, for this
 * call (`htm` POST, `htu` the called URL under ISSUER), with `ath` the token's hash. The refusals are
 * 401 with a `DPoP` challenge naming the error and the algorithms a proof may use.
 */
import type { Answer } from "../domain/Answer.js"
import { SIGNING_ALGORITHMS } from "../domain/KeyCredential.js"

/** The `DPoP` challenge (RFC 9449 §7.1), with the error when there is one. */
export const dpopChallenge = (error?: "invalid_token" | "invalid_dpop_proof" | "insufficient_scope") => ({
  "www-authenticate": `DPoP realm="service"${error === undefined ? "" : `, error="${error}"`}, algs="${SIGNING_ALGORITHMS.join(" ")}"`
})

/** A 401 answered with the DPoP challenge. */
export const dpopRefusal = (error: "invalid_token" | "invalid_dpop_proof", description: string): Answer => ({
  status: 401,
  headers: dpopChallenge(error),
  body: { error, error_description: description }
})

export const boundTokenAsBearer = dpopRefusal("invalid_token", "The access token is bound to a DPoP key: present it as DPoP with a proof")
export const unboundTokenAsDpop = dpopRefusal("invalid_token", "The access token is not bound to a DPoP key")
export const proofMissing = dpopRefusal("invalid_dpop_proof", "A DPoP proof is required with a DPoP-bound access token")
export const wrongProofKey = dpopRefusal("invalid_dpop_proof", "The DPoP proof is not by the key the access token is bound to")
/** A Bearer (unbound) token for a service with `require_dpop`. */
export const dpopRequired = dpopRefusal("invalid_token", "This service requires a DPoP-bound access token")

/** A refusal of a token presented as DPoP: the same answer, with the DPoP challenge for its error. */
export const asDpopRefusal = (refusal: Answer): Answer => {
  const error = (refusal.body as { readonly error?: string } | undefined)?.error
  return error === "invalid_token" || error === "insufficient_scope"
    ? { ...refusal, headers: { ...refusal.headers, ...dpopChallenge(error) } }
    : refusal
}
