/**
 * `POST /oauth/token` (docs/contract.md §1). The payload is described for OpenAPI but decoded by
 * the handler itself (`handleRaw`): repeated, empty and non-form fields must all answer with the
 * OAuth error body, never the framework's decode error.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { SERVICE_CALL_SCOPE, TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import {
  InvalidClientWire,
  InvalidDpopProofWire,
  InvalidRequestWire,
  PayloadTooLargeWire,
  StorageUnavailableWire,
  TooManyAttemptsWire,
  UnsupportedGrantTypeWire
} from "../domain/Errors.js"

export const TokenRequest = Schema.Struct({
  grant_type: Schema.Literal("client_credentials"),
  client_id: Schema.optional(Schema.String).annotations({
    description: "Client id (starts with svc_); required unless sent with HTTP Basic authentication."
  }),
  client_secret: Schema.optional(Schema.String).annotations({
    description: "Client secret; required unless sent with HTTP Basic authentication, or a client assertion is sent."
  }),
  client_assertion_type: Schema.optional(Schema.Literal("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")).annotations({
    description: "private_key_jwt (RFC 7523), for a key credential: with client_assertion, in place of client_secret."
  }),
  client_assertion: Schema.optional(Schema.String).annotations({
    description: "A JWT signed with the key credential's private key: iss = sub = the client id, aud = the issuer, " +
      "exp at most 5 minutes ahead, a jti never used before."
  }),
  profile: Schema.String.annotations({ description: "Profile identifier." }),
  environment: Schema.String.annotations({ description: "Environment name within the profile." }),
  service_uuid: Schema.String.annotations({ description: "UUID of the target service." }),
  scope: Schema.optional(Schema.String).annotations({
    description: "Optional. Every token carries the one scope there is, service:call; a scope sent is not checked."
  })
}).pipe(
  HttpApiSchema.withEncoding({ kind: "UrlParams" }),
  (schema) => schema.annotations({ identifier: "TokenRequest" })
)

export const TokenResponse = Schema.Struct({
  access_token: Schema.String.annotations({ description: "RS256 JWT for the requested service." }),
  token_type: Schema.Literal("Bearer", "DPoP").annotations({ description: "Bearer; DPoP when the request carried a DPoP proof (RFC 9449 §5)." }),
  expires_in: Schema.Literal(TOKEN_LIFETIME_SECONDS).annotations({
    jsonSchema: { type: "integer", enum: [TOKEN_LIFETIME_SECONDS], description: "Seconds until the token expires." }
  }),
  scope: Schema.Literal(SERVICE_CALL_SCOPE).annotations({ description: "The token's scope." })
}).annotations({ identifier: "TokenResponse" })

export class TokenApi extends HttpApiGroup.make("token")
  .add(
    HttpApiEndpoint.post("issueToken", "/oauth/token")
      .setPayload(TokenRequest)
      .addSuccess(TokenResponse)
      .addError(InvalidRequestWire)
      .addError(UnsupportedGrantTypeWire)
      .addError(InvalidClientWire)
      .addError(InvalidDpopProofWire)
      .addError(PayloadTooLargeWire)
      .addError(TooManyAttemptsWire)
      .addError(StorageUnavailableWire)
      .annotate(OpenApi.Summary, "Obtain an access token (client credentials grant)")
      .annotate(
        OpenApi.Description,
        "Checks, in order: grant_type present (400 invalid_request), grant_type is client_credentials " +
          "(400 unsupported_grant_type), every other field present (400 invalid_request), the profile, " +
          "environment and service exist and the service has auth_type oauth (400 invalid_request), the " +
          "client credentials are a live credential of that service (401 invalid_client). Every answer " +
          "carries Cache-Control: no-store and Pragma: no-cache. The examples' ids are placeholders: a token " +
          "needs a profile, environment and oauth service that exist and a live credential of it (made with " +
          "the admin API, the editor at /admin or the CLI), otherwise 400 invalid_request \"Missing required " +
          "parameters\" (an unknown target) or 401 invalid_client. The fields are read from a form body " +
          "(application/x-www-form-urlencoded) only: a JSON body carries none, so it gets 400 invalid_request " +
          "\"Missing required parameters\"."
      )
  )
  .annotate(OpenApi.Title, "OAuth 2.0 token endpoint")
  .annotate(
    OpenApi.Description,
    "The client credentials grant (RFC 6749 §4.4): a client id and secret for a one-hour RS256 JWT for one service."
  )
{}
