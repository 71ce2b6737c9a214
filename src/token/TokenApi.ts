/**
 * `POST /oauth/token` (docs/contract.md §1). The payload is described for OpenAPI but decoded by
 * the handler itself (`handleRaw`): repeated, empty and non-form fields must all answer with the
 * OAuth error body, never the framework's decode error.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { SERVICE_CALL_SCOPE, TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import {
  AdminTooManyAttemptsWire,
  InvalidClientWire,
  InvalidDpopProofWire,
  InvalidRequestWire,
  InvalidTargetWire,
  IntrospectionNotAllowedWire,
  PayloadTooLargeWire,
  StorageUnavailableWire,
  TooManyAttemptsWire,
  UnauthorizedWire,
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
  profile: Schema.optional(Schema.String).annotations({
    description: "Profile identifier; required unless `resource` names the service."
  }),
  environment: Schema.optional(Schema.String).annotations({
    description: "Environment name within the profile; required unless `resource` names the service."
  }),
  service_uuid: Schema.optional(Schema.String).annotations({
    description: "UUID of the target service; required unless `resource` names the service."
  }),
  resource: Schema.optional(Schema.String).annotations({
    description: "RFC 8707: the service's call URL, `<issuer>/service/{profile}/{environment}/json/{uuid}` (the token's " +
      "`aud`), instead of profile, environment and service_uuid; sent with them it must name the same service. " +
      "Sent twice, malformed, contradicting them, or naming no oauth service: 400 invalid_target."
  }),
  scope: Schema.optional(Schema.String).annotations({
    description: "Optional. Every token carries the one scope there is, service:call; a scope sent is not checked."
  })
}).pipe(
  HttpApiSchema.withEncoding({ kind: "UrlParams" }),
  (schema) => schema.annotations({ identifier: "TokenRequest" })
)

export const TokenResponse = Schema.Struct({
  access_token: Schema.String.annotations({ description: "RS256 JWT for the requested service." }),
  token_type: Schema.Literal("Bearer", "DPoP").annotations({
    description: "Bearer; DPoP when the request carried a DPoP proof (RFC 9449 §5)."
  }),
  expires_in: Schema.Literal(TOKEN_LIFETIME_SECONDS).annotations({
    jsonSchema: { type: "integer", enum: [TOKEN_LIFETIME_SECONDS], description: "Seconds until the token expires." }
  }),
  scope: Schema.Literal(SERVICE_CALL_SCOPE).annotations({ description: "The token's scope." })
}).annotations({ identifier: "TokenResponse" })

/** How a client authenticates in a form (RFC 6749 §2.3.1, RFC 7523 §2.2), at revocation and introspection as at the token endpoint. */
const formClientFields = (whose: string) => ({
  client_id: Schema.optional(Schema.String).annotations({
    description: `${whose}; required with client_secret unless sent with HTTP Basic authentication.`
  }),
  client_secret: Schema.optional(Schema.String).annotations({
    description: "Its secret (client_secret_post); or HTTP Basic authentication (client_secret_basic); never both."
  }),
  client_assertion_type: Schema.optional(Schema.Literal("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")).annotations({
    description: "private_key_jwt (RFC 7523), for a key credential: with client_assertion, in place of client_secret."
  }),
  client_assertion: Schema.optional(Schema.String).annotations({
    description: "A JWT signed with the key credential's private key, as at the token endpoint (aud = the issuer)."
  })
})

export const RevocationRequest = Schema.Struct({
  token: Schema.String.annotations({ description: "The access token to revoke." }),
  token_type_hint: Schema.optional(Schema.String).annotations({
    description: "Optional and ignored: every token this server issues is an access token."
  }),
  ...formClientFields("The client id of the token's credential")
}).pipe(
  HttpApiSchema.withEncoding({ kind: "UrlParams" }),
  (schema) => schema.annotations({ identifier: "RevocationRequest" })
)

export const IntrospectionRequest = Schema.Struct({
  token: Schema.String.annotations({ description: "The access token to introspect." }),
  token_type_hint: Schema.optional(Schema.String).annotations({ description: "Optional and ignored." }),
  ...formClientFields("The client id of a credential an admin allowed to introspect (introspect_profiles)")
}).pipe(
  HttpApiSchema.withEncoding({ kind: "UrlParams" }),
  (schema) => schema.annotations({ identifier: "IntrospectionRequest" })
)

const TokenData = Schema.Struct({ service_uuid: Schema.String, profile: Schema.String, environment: Schema.String })

export const IntrospectionResponse = Schema.Union(
  Schema.Struct({
    active: Schema.Literal(true).annotations({ description: "true: the service call would accept this token now." }),
    scope: Schema.String.annotations({ description: "The token's scope (space-separated): service:call." }),
    client_id: Schema.String.annotations({ description: "The client id of the credential the token was issued to." }),
    token_type: Schema.Literal("Bearer", "DPoP").annotations({
      description: "DPoP for a token bound to a DPoP key (RFC 9449 §6.2), which must be presented with a proof by it; else Bearer."
    }),
    exp: Schema.Int.annotations({ description: "When the token expires, in seconds since the epoch." }),
    iat: Schema.Int.annotations({ description: "When the token was issued, in seconds since the epoch." }),
    nbf: Schema.optional(Schema.Int).annotations({
      description: "Not valid before, in seconds since the epoch; only when the token has one."
    }),
    sub: Schema.String.annotations({ description: "The client id the token was issued to." }),
    aud: Schema.String.annotations({ description: "The service-call URL the token is for." }),
    iss: Schema.String.annotations({ description: "This server's issuer." }),
    jti: Schema.String.annotations({ description: "The token's id." }),
    cnf: Schema.optional(Schema.Struct({
      jkt: Schema.String.annotations({ description: "The base64url SHA-256 thumbprint (RFC 7638) of the DPoP key." })
    })).annotations({ description: "Only for a DPoP-bound token: the key it is bound to (RFC 9449 §6.2)." }),
    data: TokenData.annotations({ description: "The service the token is for: its profile, environment and uuid." })
  }).annotations({
    identifier: "ActiveToken",
    description: "An active token (RFC 7662 §2.2): one the service call would accept for every reason of the token or its " +
      "credential (signature and key, times, credential live and not expired, not revoked); its claims."
  }),
  Schema.Struct({ active: Schema.Literal(false) }).annotations({
    identifier: "InactiveToken",
    description: "Exactly {\"active\":false}, whatever the reason: expired, not yet valid, revoked, of a deleted or " +
      "expired credential or service, forged, of another issuer, unparseable, or outside the caller's profiles."
  })
).annotations({ identifier: "IntrospectionResponse" })

export class TokenApi extends HttpApiGroup.make("token")
  .add(
    HttpApiEndpoint.post("issueToken", "/oauth/token")
      .setPayload(TokenRequest)
      .addSuccess(TokenResponse)
      .addError(InvalidRequestWire)
      .addError(UnsupportedGrantTypeWire)
      .addError(InvalidTargetWire)
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
          "\"Missing required parameters\". With `resource` (RFC 8707) the target may be named by its URL instead: " +
          "after the grant type, a repeated, malformed or contradicting resource, and then (after the client fields) one " +
          "naming no oauth service, answer 400 invalid_target; requests without it answer exactly as described. " +
          "A DPoP header (RFC 9449) binds the token to the proof's key (token_type DPoP; an invalid proof, after the " +
          "client authenticated: 400 invalid_dpop_proof). For a service with require_dpop, a request without one is " +
          "400 invalid_request \"This service requires a DPoP proof\", checked once the client authenticated."
      )
  )
  .add(
    HttpApiEndpoint.post("revokeToken", "/oauth/revoke")
      .setPayload(RevocationRequest)
      .addSuccess(HttpApiSchema.Empty(200))
      .addError(InvalidRequestWire)
      .addError(InvalidClientWire)
      .addError(PayloadTooLargeWire)
      .addError(TooManyAttemptsWire)
      .addError(StorageUnavailableWire)
      .annotate(OpenApi.Summary, "Revoke an access token (RFC 7009)")
      .annotate(
        OpenApi.Description,
        "A client revokes one of its own tokens, authenticated as at the token endpoint (client_secret_post, " +
          "client_secret_basic or private_key_jwt, one of them; a failure is 401 invalid_client, counted toward the same throttle, 429). " +
          "The answer is 200 with an empty body whether the token was valid, unknown, expired, already revoked or " +
          "another client's (then it is left alone). A revoked token is refused by every instance's gateway and " +
          "reported inactive by introspection from the next request on, until its exp. token missing: 400 " +
          "invalid_request. Every answer carries Cache-Control: no-store."
      )
  )
  .add(
    HttpApiEndpoint.post("introspectToken", "/oauth/introspect")
      .setPayload(IntrospectionRequest)
      .addSuccess(IntrospectionResponse)
      .addError(InvalidRequestWire)
      .addError(InvalidClientWire)
      .addError(UnauthorizedWire)
      .addError(IntrospectionNotAllowedWire)
      .addError(PayloadTooLargeWire)
      .addError(TooManyAttemptsWire)
      .addError(AdminTooManyAttemptsWire)
      .addError(StorageUnavailableWire)
      .annotate(OpenApi.Summary, "Introspect an access token (RFC 7662)")
      .annotate(
        OpenApi.Description,
        "For resource servers, two ways to call it, one a request. (1) A credential an admin allowed to introspect " +
          "(introspect_profiles), authenticated exactly as at the token endpoint: client_secret_basic, client_secret_post " +
          "or private_key_jwt; a failure (wrong secret, unknown, deleted or expired credential) is 401 invalid_client, " +
          "counted toward the token endpoint's throttle (429); a credential not allowed to introspect: 403 " +
          "unauthorized_client; tokens of profiles outside its introspect_profiles: {\"active\":false}. (2) " +
          "Authorization: Bearer <admin token> of any role whose profiles cover the token's profile, or of the " +
          "introspector role; a wrong one: 401 unauthorized with WWW-Authenticate: Bearer realm=\"admin\". Neither: " +
          "that same 401; both: 400 invalid_request. An active token answers its claims, exactly when the service call " +
          "would accept it; every other token answers exactly {\"active\":false}. token missing: 400 invalid_request. " +
          "Every answer carries Cache-Control: no-store."
      )
  )
  .annotate(OpenApi.Title, "OAuth 2.0 token endpoint")
  .annotate(
    OpenApi.Description,
    "The client credentials grant (RFC 6749 §4.4): a client id and secret for a one-hour RS256 JWT for one service; " +
      "its revocation by the client (RFC 7009) and its introspection by resource servers (RFC 7662)."
  )
{}
