/**
 * Typed failures of the domain. Each maps to exactly one wire body
 * (`{"error","error_description"}`) in `src/api/WireErrors.ts`.
 */
import { Schema } from "effect"

/** 400 `invalid_request`: a missing or malformed parameter, or an unknown profile/environment/service at the token endpoint. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  description: Schema.String
}) {}

/** 400 `unsupported_grant_type`. */
export class UnsupportedGrantType extends Schema.TaggedError<UnsupportedGrantType>()("UnsupportedGrantType", {}) {}

/** 401 `invalid_client`; `basic` records whether the client authenticated with HTTP Basic (RFC 6749 §5.2 challenge). */
export class InvalidClient extends Schema.TaggedError<InvalidClient>()("InvalidClient", {
  basic: Schema.Boolean
}) {}

/** 401 `unauthorized`: the admin API was called without the admin token. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  description: Schema.String
}) {}

/** 404 `not_found`. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  description: Schema.String
}) {}

/** 409 `conflict`: the request contradicts stored state (for example a service uuid taken by another service). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  description: Schema.String
}) {}

/** 409 `credential_limit_exceeded`: a service would hold more than two live credentials. */
export class CredentialLimitExceeded extends Schema.TaggedError<CredentialLimitExceeded>()("CredentialLimitExceeded", {
  description: Schema.String
}) {}

/** 413 `invalid_request`: the request body is larger than the configured limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  description: Schema.String
}) {}

/** 503 `temporarily_unavailable`: the database could not be reached. */
export class StorageUnavailable extends Schema.TaggedError<StorageUnavailable>()("StorageUnavailable", {
  description: Schema.String
}) {}

/** 401 `invalid_token` at the service endpoint: malformed, forged, expired or revoked. */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  description: Schema.String
}) {}

/** 403 `insufficient_scope`: a genuine token without `service:call`. */
export class InsufficientScope extends Schema.TaggedError<InsufficientScope>()("InsufficientScope", {
  description: Schema.String
}) {}

/** 502 `bad_gateway`: the service's handler failed or its upstream was unreachable or answered badly. */
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", {
  description: Schema.String
}) {}

/** 429 `invalid_client`: too many failed client authentications from one address (RFC 6749 §2.3.1). */
export class TooManyAttempts extends Schema.TaggedError<TooManyAttempts>()("TooManyAttempts", {
  retryAfterSeconds: Schema.Int
}) {}
