/**
 * `POST /oauth/revoke` (RFC 7009): a client revokes one of its own access tokens. The client
 * authenticates as at the token endpoint, through the same function (`ClientAuthentication`:
 * `client_secret_post`, `client_secret_basic` or, for a key credential, `private_key_jwt`; never two
 * at once; an expired credential authenticates nobody;
 * a failure is the token endpoint's `401 invalid_client` and counts toward the same throttle); the
 * answer is then `200` with an empty body whatever the token was (valid, unknown, expired, already
 * revoked, or another client's, which is left alone), so the endpoint tells nobody anything about a
 * token. Not a hot path: the client is found by its client id with one indexed read.
 *
 * A revocation is a catalogue write of the token's service (`CatalogueWrites.revokeToken`): answered
 * only once every instance has dropped that service's cached answers, it is refused by the gateway
 * and reported inactive by introspection from the next request on, everywhere, until its `exp`.
 */
import { Context, Effect, Either, Layer, Option } from "effect"
import type { AuthorizationHeader } from "../domain/AuthorizationHeader.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { INVALID_REQUEST_DESCRIPTION, InvalidRequest } from "../domain/Errors.js"
import { serviceAddress } from "../domain/ServiceAddress.js"
import { CatalogueLookup } from "../catalogue/CatalogueLookup.js"
import { CatalogueWrites } from "../catalogue/CatalogueWrites.js"
import { clientRefusal, FormClientAuthentication } from "./FormClientAuthentication.js"
import { clientCredentials, formFieldsOf, NO_STORE } from "./TokenForm.js"
import { TokenService } from "./TokenService.js"
import { tokenStanding } from "./TokenStanding.js"

/** What a request to a form endpoint of clients said, as its HTTP entry read it. */
export interface FormInput {
  readonly authorization: AuthorizationHeader
  /** The body when it is a form (`application/x-www-form-urlencoded`); undefined for any other body. */
  readonly form: string | undefined
  readonly remoteAddress: string
  readonly nowMillis: number
}

const REVOCATION_FIELDS = ["token", "token_type_hint", "client_id", "client_secret", "client_assertion", "client_assertion_type"] as const
type RevocationField = typeof REVOCATION_FIELDS[number]
const revocationFields = formFieldsOf(REVOCATION_FIELDS)

/** The answer to every authenticated revocation: no body, nothing said about the token. */
export const REVOKED: Answer = { status: 200, headers: NO_STORE, body: undefined }

const refusal = clientRefusal
const missing = refusal(new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION }))

export interface TokenRevocationShape {
  readonly answer: (input: FormInput) => Effect.Effect<Answer>
}

export class TokenRevocation extends Context.Tag("service-auth/TokenRevocation")<TokenRevocation, TokenRevocationShape>() {
  static readonly layer = Layer.effect(
    TokenRevocation,
    Effect.gen(function*() {
      const lookup = yield* CatalogueLookup
      const writes = yield* CatalogueWrites
      const tokens = yield* TokenService
      const clients = yield* FormClientAuthentication

      const revoke = Effect.fn("TokenRevocation.revoke", { captureStackTrace: false })(function*(input: FormInput) {
        // Only a form body carries fields; JSON or anything else yields none, as at the token endpoint.
        const parsed = input.form === undefined ? Either.right({}) : revocationFields(new URLSearchParams(input.form))
        if (Either.isLeft(parsed)) return refusal(parsed.left)
        const fields: Partial<Record<RevocationField, string>> = parsed.right
        const client = clientCredentials(input.authorization, fields)
        if (Either.isLeft(client)) return refusal(client.left)
        if (fields.token === undefined || client.right === undefined) return missing
        // Which client this is: the token endpoint's one answer, with its throttle (`FormClientAuthentication`).
        const authenticated = yield* clients.authenticate(client.right, input.remoteAddress, input.nowMillis)
        if (Either.isLeft(authenticated)) return authenticated.left
        const { clientId } = authenticated.right

        // Authenticated: from here on, the answer is 200 whatever the token is.
        const verified = yield* Effect.either(tokens.verify(fields.token))
        if (Either.isLeft(verified) || verified.right.client_id !== clientId) return REVOKED
        const claims = verified.right
        const address = serviceAddress(claims.data.profile, claims.data.environment, claims.data.service_uuid)
        if (address === undefined) return REVOKED
        // Nothing to write for a token the gateway refuses already (`TokenStanding`): its credential
        // gone or expired, or revoked before.
        const route = yield* lookup.findServiceRoute(address, Option.some(clientId))
        const standing = Option.isNone(route)
          ? "revoked"
          : tokenStanding(claims, address, route.value, input.nowMillis, tokens.isForService)
        if (standing === "revoked" || standing === "credential-expired") return REVOKED
        yield* writes.revokeToken(
          { jti: claims.jti, clientId, address, expiresAt: new Date(claims.exp * 1000) },
          new Date(input.nowMillis),
          { name: clientId, source: input.remoteAddress }
        )
        return REVOKED
      }, Effect.catchTag("StorageUnavailable", (error) => Effect.succeed(errorAnswer(error, NO_STORE))))

      return TokenRevocation.of({ answer: revoke })
    })
  )
}
