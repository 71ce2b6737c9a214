/**
 * `POST /service/{profile}/{env}/json/{uuid}` (docs/contract.md §2): the call external
 * applications make with their Bearer token. Decoded by the handler, which checks the token before
 * it reads the body.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  BadGatewayWire,
  InsufficientScopeWire,
  InvalidRequestWire,
  InvalidTokenWire,
  NotFoundWire,
  PayloadTooLargeWire,
  RateLimitedWire,
  StorageUnavailableWire
} from "../domain/Errors.js"

export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  identifier: "JsonObject",
  description: "A JSON object, of any members.",
  jsonSchema: { type: "object", additionalProperties: true, description: "A JSON object, of any members." }
})

export class ServiceApi extends HttpApiGroup.make("service")
  .add(
    HttpApiEndpoint.post("callService", "/service/:profile/:environment/json/:uuid")
      // Plain strings: a name that cannot exist is a service that does not exist (404), not a 400.
      .setPath(Schema.Struct({ profile: Schema.String, environment: Schema.String, uuid: Schema.String }))
      .setPayload(JsonObject)
      .addSuccess(JsonObject)
      .addError(InvalidRequestWire)
      .addError(InvalidTokenWire)
      .addError(InsufficientScopeWire)
      .addError(NotFoundWire)
      .addError(PayloadTooLargeWire)
      .addError(BadGatewayWire)
      .addError(RateLimitedWire)
      .addError(StorageUnavailableWire)
      .annotate(OpenApi.Summary, "Call a hosted service")
      .annotate(
        OpenApi.Description,
        "404 not_found when the profile, environment or service does not exist. For a service with " +
          "auth_type oauth: 401 invalid_token without a token, 400 invalid_request when Authorization " +
          "is not one `Bearer <token>`, 401 invalid_token for a malformed, forged, expired or revoked " +
          "token or one issued for another service, 403 insufficient_scope without service:call " +
          "(each with a WWW-Authenticate: Bearer challenge, RFC 6750 §3). Then the body must be a JSON " +
          "object (400) within the size limit (413); 502 bad_gateway when the handler or its upstream fails. " +
          "A proxy service passes on its upstream's 400, 404, 409, 422 and 429 answers with a JSON object body " +
          "(status, body, and 429's Retry-After) as they are, so those statuses may carry the upstream's own body; " +
          "503 temporarily_unavailable with Retry-After while the upstream's circuit breaker is open (5 failures " +
          "in a row) or UPSTREAM_MAX_CONCURRENCY calls to it are in flight. A service with a rate_limit answers " +
          "429 rate_limited with Retry-After once a client has made its calls of the window (checked after the token, " +
          "before the body), and every answer of a call let through carries the IETF draft's RateLimit-Policy " +
          "(\"default\";q=<requests>;w=<seconds>) and RateLimit (\"default\";r=<left>;t=<seconds to reset>). " +
          "A DPoP-bound token is accepted only as `DPoP <token>` with a DPoP proof for this call (RFC 9449 §7); " +
          "a service with require_dpop refuses Bearer tokens (401 invalid_token). Those refusals carry a " +
          "WWW-Authenticate: DPoP challenge."
      )
  )
  .annotate(OpenApi.Title, "Service calls")
  .annotate(
    OpenApi.Description,
    "The hosted services, called with an access token issued for them (or without one when open)."
  )
{}
