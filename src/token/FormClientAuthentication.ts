/**
 * Client authentication at the form endpoints beside the token endpoint (`/oauth/revoke`,
 * `/oauth/introspect`), written once for both: the client's credentials as the token endpoint reads
 * them (`clientCredentials`), the credential its client id names (one indexed read), the token
 * endpoint's one answer to "which client is this" (`authenticatedClient`: expiry included; for
 * `private_key_jwt`, the credential's key must verify the assertion), and the token endpoint's
 * failure throttle (`AuthFailureLimiter`, keyed by client id and address, shared with it): a failure
 * is `401 invalid_client` (with the Basic challenge when Basic was used), or 429 once the pair has
 * no attempt left.
 */
import { Context, Effect, Either, Layer, Option } from "effect"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { InvalidClient, type InvalidRequest, type StorageUnavailable, TooManyAttempts } from "../domain/Errors.js"
import { type ClientId, isClientId } from "../domain/Identifiers.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import type { ClientCredential } from "../catalogue/CatalogueQueries.js"
import { AuthFailureLimiter } from "./AuthFailureLimiter.js"
import { ClientAssertions } from "./ClientAssertion.js"
import { authenticatedClient, refusalLine, refusalReason } from "./ClientAuthentication.js"
import { ClientSecrets } from "../catalogue/ClientSecrets.js"
import { type ClientCredentials, NO_STORE } from "./TokenForm.js"

/** A refusal as the token endpoint answers it: `no-store`, and the Basic challenge when Basic authentication failed. */
export const clientRefusal = (error: InvalidRequest | InvalidClient | TooManyAttempts): Answer =>
  errorAnswer(
    error,
    error._tag === "InvalidClient" && error.basic ? { ...NO_STORE, "www-authenticate": `Basic realm="oauth"` } : NO_STORE
  )

/** The client a request authenticated as, with its live credential. */
export interface AuthenticatedClient {
  readonly clientId: ClientId
  readonly credential: ClientCredential
}

export interface FormClientAuthenticationShape {
  /** The client, or the refusal to answer (401 `invalid_client`, 429). */
  readonly authenticate: (
    presented: ClientCredentials,
    remoteAddress: string,
    nowMillis: number
  ) => Effect.Effect<Either.Either<AuthenticatedClient, Answer>, StorageUnavailable>
}

export class FormClientAuthentication extends Context.Tag("service-auth/FormClientAuthentication")<
  FormClientAuthentication,
  FormClientAuthenticationShape
>() {
  static readonly layer = Layer.effect(
    FormClientAuthentication,
    Effect.gen(function*() {
      const queries = yield* CatalogueQueries
      const secrets = yield* ClientSecrets
      const limiter = yield* AuthFailureLimiter
      const assertions = yield* ClientAssertions

      const authenticate = (presented: ClientCredentials, remoteAddress: string, nowMillis: number) =>
        Effect.gen(function*() {
          const { assertion, basic, clientId } = presented
          const blocked = limiter.blockedAt(clientId, remoteAddress, nowMillis)
          if (Option.isSome(blocked)) return Either.left(clientRefusal(new TooManyAttempts({ retryAfterSeconds: blocked.value })))
          // Which client this is: the token endpoint's one answer (`ClientAuthentication`), expiry included.
          const stored = isClientId(clientId) ? Option.getOrUndefined(yield* queries.findClientCredential(clientId)) : undefined
          const credential = authenticatedClient(presented, stored, nowMillis, secrets.matches)
          const verdict = credential === undefined || assertion === undefined
            ? undefined
            : yield* assertions.verdict(assertion.assertion, clientId, credential.secretHash, nowMillis, credential.address.profile)
          const authenticated = credential !== undefined && verdict?._tag !== "Refused"
          if (!authenticated || !isClientId(clientId)) {
            // Told it is wrong only when it took one of the pair's attempts (AuthFailureLimiter); a
            // refused assertion says why when that reveals no secret (`ClientAssertion`).
            if (credential === undefined) {
              // An assertion's verdict logs its own reason (`ClientAssertion`).
              yield* Effect.logDebug(refusalLine(clientId, refusalReason(presented, stored, nowMillis)))
            }
            const over = yield* limiter.recordFailure(clientId, remoteAddress)
            const reason = verdict?._tag === "Refused" && verdict.refusal.disclosed ? verdict.refusal.reason : undefined
            return Either.left(
              clientRefusal(
                Option.isSome(over) ? new TooManyAttempts({ retryAfterSeconds: over.value }) : new InvalidClient({ basic, reason })
              )
            )
          }
          const late = yield* limiter.admit(clientId, remoteAddress)
          if (Option.isSome(late)) return Either.left(clientRefusal(new TooManyAttempts({ retryAfterSeconds: late.value })))
          return Either.right<AuthenticatedClient>({ clientId, credential })
        })

      return FormClientAuthentication.of({ authenticate })
    })
  )
}
