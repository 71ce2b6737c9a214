/**
 * "Which client does this request authenticate as?", answered once. The token endpoint
 * (`decideToken`), revocation and introspection each read the client's credentials from their form
 * (`clientCredentials`: `client_secret_basic`, `client_secret_post` or `private_key_jwt`), find the
 * credential the client id names, and ask `authenticatedClient`; a rule about who may authenticate
 * (an expiry, a suspension) is written here and holds at every endpoint that authenticates clients.
 *
 * Pure and allocation-free (the token endpoint's fast path calls it): it answers the credential, or
 * undefined when the request authenticates as nobody. For `private_key_jwt` the answer is the
 * credential whose key must still verify the assertion (`ClientAssertions.verify`, asynchronous):
 * the client is authenticated only once that verification succeeds.
 */
import type { ClientSecretsShape } from "../catalogue/ClientSecrets.js"
import { isClientId } from "../domain/Identifiers.js"
import { isKeyVerifier } from "../domain/KeyCredential.js"
import { isFederatedVerifier } from "../domain/FederatedCredential.js"
import { assertionApplies } from "./ClientAssertion.js"
import type { ClientCredentials } from "./TokenForm.js"

/** A credential as storage found it by the presented client id. */
export interface StoredClient {
  readonly secretHash: string
  /** When it expires (then it authenticates nobody, as if deleted); null or absent: never. */
  readonly expiresAt?: Date | null | undefined
}

/** Whether a stored credential may authenticate at this time: not expired. */
export const clientIsLive = (stored: StoredClient, nowMillis: number): boolean =>
  stored.expiresAt == null || nowMillis < stored.expiresAt.getTime()

/**
 * The credential the request authenticates as (for an assertion: the one whose key must verify it),
 * or undefined. The secret comparison runs even when no credential was found, so an unknown client
 * id costs what a wrong secret costs.
 */
export const authenticatedClient = <C extends StoredClient>(
  presented: ClientCredentials,
  stored: C | undefined,
  nowMillis: number,
  matches: ClientSecretsShape["matches"]
): C | undefined => {
  // An expired credential is refused as a deleted one, on every instance at once: by the clock.
  const credential = stored !== undefined && clientIsLive(stored, nowMillis) ? stored : undefined
  const { assertion } = presented
  if (assertion !== undefined) {
    // private_key_jwt: only a key credential's key verifies an assertion (ClientAssertion.ts).
    return credential !== undefined && assertionApplies(assertion, credential.secretHash) ? credential : undefined
  }
  // A secret never matches a key credential's verifier.
  const matched = presented.clientSecret._tag === "Some" && matches(presented.clientSecret.value, credential?.secretHash)
  return matched ? credential : undefined
}

/**
 * Why `authenticatedClient` authenticated nobody, for the debug log only: the answer's text is fixed
 * (`Invalid client credentials`), since telling a caller without the key or secret which client ids
 * exist, or what kind they are, would help guess them. Never the secret or the assertion.
 */
export const refusalReason = (presented: ClientCredentials, stored: StoredClient | undefined, nowMillis: number): string => {
  if (stored === undefined) return "the client id names no live credential (unknown, deleted, or of another service)"
  if (!clientIsLive(stored, nowMillis)) return `the credential expired at ${stored.expiresAt!.toISOString()}`
  const key = isKeyVerifier(stored.secretHash)
  const federated = isFederatedVerifier(stored.secretHash)
  if (presented.assertion !== undefined) {
    if (!key && !federated) return "a client assertion was sent for a secret credential, which authenticates with its client secret only"
    return "the client_assertion_type is not urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
  }
  if (key) return "a client secret was sent for a key credential, which authenticates with private_key_jwt only"
  if (federated) return "a client secret was sent for a federated credential, which authenticates with its workload's token only"
  return "the client secret does not match"
}

/** The debug log's line for a refused client; a client id not of our form is not written (it may be a pasted secret). */
export const refusalLine = (clientId: string, reason: string): string =>
  `client authentication of ${isClientId(clientId) ? clientId : "a client id not of the form svc_…"} refused: ${reason}`
