/**
 * Every error the service answers, each declared once: its typed failure (a `Schema.TaggedError`,
 * what the code fails with), its status and its wire body (exactly `{"error","error_description"}`),
 * which the OpenAPI document shows and the handlers write. Adding an error touches this file only:
 * the class, its wire schema, and its entry in `WIRE_ERRORS`.
 *
 * A `TaggedError` alone would put `_tag` on the wire, so each wire schema is a transform from the
 * wire struct to the error class; the distinct literal `error` codes keep the API's error union
 * unambiguous when decoding (e.g. in a generated client).
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

const wireError = <Self extends { readonly _tag: string }, I, Code extends string>(
  errorClass: Schema.Schema<Self, I>,
  options: {
    readonly code: Code
    readonly status: number
    readonly identifier: string
    readonly summary: string
    readonly describe: (error: Self) => string
    readonly make: (description: string) => Self
  }
) =>
  Schema.transform(
    Schema.Struct({ error: Schema.Literal(options.code), error_description: Schema.String }),
    Schema.typeSchema(errorClass),
    {
      strict: true,
      decode: (wire) => options.make(wire.error_description),
      encode: (error) => ({ error: options.code, error_description: options.describe(error) })
    }
  ).annotations({
    identifier: options.identifier,
    description: options.summary,
    ...HttpApiSchema.annotations({ status: options.status })
  })

/** The fixed descriptions the contract gives some errors (docs/contract.md §1). */
export const INVALID_REQUEST_DESCRIPTION = "Missing required parameters"
export const UNSUPPORTED_GRANT_TYPE_DESCRIPTION = "Only client_credentials grant type is supported"
export const INVALID_CLIENT_DESCRIPTION = "Invalid client credentials"
export const TOO_MANY_ATTEMPTS_DESCRIPTION = "Too many failed authentication attempts"
/** A token request without a DPoP proof for a service with `require_dpop` (once the client authenticated). */
export const DPOP_REQUIRED_DESCRIPTION = "This service requires a DPoP proof"

/** 400 `invalid_request`: A missing or malformed parameter, or an unknown profile/environment/service at the token endpoint. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", { description: Schema.String }) {}
export const InvalidRequestWire = wireError(InvalidRequest, {
  code: "invalid_request",
  status: 400,
  identifier: "InvalidRequestError",
  summary: "A parameter is missing, repeated or malformed, or the target does not exist (token endpoint).",
  describe: (e) => e.description,
  make: (description) => new InvalidRequest({ description })
})

/** 400 `invalid_target`: A `resource` (RFC 8707) sent twice, malformed, contradicting the other fields, or naming no oauth service. */
export class InvalidTarget extends Schema.TaggedError<InvalidTarget>()("InvalidTarget", { description: Schema.String }) {}
export const InvalidTargetWire = wireError(InvalidTarget, {
  code: "invalid_target",
  status: 400,
  identifier: "InvalidTargetError",
  summary: "The resource parameter (RFC 8707) is repeated, malformed, names another service than the other fields, " +
    "or names no oauth service.",
  describe: (e) => e.description,
  make: (description) => new InvalidTarget({ description })
})

/** 400 `unsupported_grant_type`: A grant type other than client_credentials. */
export class UnsupportedGrantType extends Schema.TaggedError<UnsupportedGrantType>()("UnsupportedGrantType", {}) {}
export const UnsupportedGrantTypeWire = wireError(UnsupportedGrantType, {
  code: "unsupported_grant_type",
  status: 400,
  identifier: "UnsupportedGrantTypeError",
  summary: "grant_type is not client_credentials.",
  describe: () => UNSUPPORTED_GRANT_TYPE_DESCRIPTION,
  make: () => new UnsupportedGrantType()
})

/**
 * 401 `invalid_client`: Client authentication failed; `basic` records whether the client used HTTP
 * Basic (RFC 6749 §5.2 challenge); `reason`, why a client assertion was refused when that reveals
 * no secret (`ClientAssertion`), follows the fixed description.
 */
export class InvalidClient extends Schema.TaggedError<InvalidClient>()("InvalidClient", {
  basic: Schema.Boolean,
  reason: Schema.optional(Schema.String)
}) {}
export const InvalidClientWire = wireError(InvalidClient, {
  code: "invalid_client",
  status: 401,
  identifier: "InvalidClientError",
  summary: "Unknown client id on this service, wrong secret, or deleted credential.",
  describe: (e) => e.reason === undefined ? INVALID_CLIENT_DESCRIPTION : `${INVALID_CLIENT_DESCRIPTION}: ${e.reason}`,
  make: () => new InvalidClient({ basic: false })
})

/** 401 `unauthorized`: The admin API was called without the admin token. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { description: Schema.String }) {}
export const UnauthorizedWire = wireError(Unauthorized, {
  code: "unauthorized",
  status: 401,
  identifier: "UnauthorizedError",
  summary: "The admin token is missing or wrong.",
  describe: (e) => e.description,
  make: (description) => new Unauthorized({ description })
})

/** 404 `not_found`: Nothing at that address. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { description: Schema.String }) {}
export const NotFoundWire = wireError(NotFound, {
  code: "not_found",
  status: 404,
  identifier: "NotFoundError",
  summary: "The profile, environment, service or credential does not exist.",
  describe: (e) => e.description,
  make: (description) => new NotFound({ description })
})

/** 403 `forbidden`: The admin token's role does not allow the action (docs/contract.md, scoped admin tokens). */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", { description: Schema.String }) {}
export const ForbiddenWire = wireError(Forbidden, {
  code: "forbidden",
  status: 403,
  identifier: "ForbiddenError",
  summary: "The admin token's role does not allow this action (the description says what the role may not do).",
  describe: (e) => e.description,
  make: (description) => new Forbidden({ description })
})

/** 409 `conflict`: The request contradicts stored state (for example a service uuid taken by another service). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", { description: Schema.String }) {}
export const ConflictWire = wireError(Conflict, {
  code: "conflict",
  status: 409,
  identifier: "ConflictError",
  summary: "The request contradicts the stored state.",
  describe: (e) => e.description,
  make: (description) => new Conflict({ description })
})

/** 409 `credential_limit_exceeded`: A service would hold more than two live credentials. */
export class CredentialLimitExceeded
  extends Schema.TaggedError<CredentialLimitExceeded>()("CredentialLimitExceeded", { description: Schema.String })
{}
export const CredentialLimitExceededWire = wireError(CredentialLimitExceeded, {
  code: "credential_limit_exceeded",
  status: 409,
  identifier: "CredentialLimitExceededError",
  summary: "The service would hold more than 2 credentials.",
  describe: (e) => e.description,
  make: (description) => new CredentialLimitExceeded({ description })
})

/** 413 `invalid_request`: The request body is larger than the configured limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", { description: Schema.String }) {}
export const PayloadTooLargeWire = wireError(PayloadTooLarge, {
  code: "invalid_request",
  status: 413,
  identifier: "PayloadTooLargeError",
  summary: "The request body exceeds the size limit.",
  describe: (e) => e.description,
  make: (description) => new PayloadTooLarge({ description })
})

/**
 * 503 `temporarily_unavailable`: The database could not be reached, or a proxy's upstream is failing
 * or saturated (`UpstreamGateway`), answered with Retry-After.
 */
export class StorageUnavailable extends Schema.TaggedError<StorageUnavailable>()("StorageUnavailable", { description: Schema.String }) {}
export const StorageUnavailableWire = wireError(StorageUnavailable, {
  code: "temporarily_unavailable",
  status: 503,
  identifier: "TemporarilyUnavailableError",
  summary: "The database cannot be reached, or a proxy service's upstream is failing or saturated; retry after Retry-After.",
  describe: (e) => e.description,
  make: (description) => new StorageUnavailable({ description })
})

/**
 * 503 `temporarily_unavailable` at the service endpoint when a proxy service's upstream is failing
 * or saturated (its circuit breaker or bulkhead, `UpstreamGuard`): the same wire body as
 * `StorageUnavailable`, which the OpenAPI document describes for both, but another cause.
 */
export class UpstreamFailing extends Schema.TaggedError<UpstreamFailing>()("UpstreamFailing", { description: Schema.String }) {}
export const UpstreamFailingWire = wireError(UpstreamFailing, {
  code: "temporarily_unavailable",
  status: 503,
  identifier: "UpstreamFailingError",
  summary: "A proxy service's upstream is failing or saturated; retry after Retry-After.",
  describe: (e) => e.description,
  make: (description) => new UpstreamFailing({ description })
})

/** 401 `invalid_token`: At the service endpoint: a token missing, malformed, forged, expired, for another service or revoked. */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", { description: Schema.String }) {}
export const InvalidTokenWire = wireError(InvalidToken, {
  code: "invalid_token",
  status: 401,
  identifier: "InvalidTokenError",
  summary: "The access token is missing, malformed, forged, expired, for another service, or revoked.",
  describe: (e) => e.description,
  make: (description) => new InvalidToken({ description })
})

/** 403 `insufficient_scope`: A genuine token without `service:call`. */
export class InsufficientScope extends Schema.TaggedError<InsufficientScope>()("InsufficientScope", { description: Schema.String }) {}
export const InsufficientScopeWire = wireError(InsufficientScope, {
  code: "insufficient_scope",
  status: 403,
  identifier: "InsufficientScopeError",
  summary: "The access token lacks the service:call scope.",
  describe: (e) => e.description,
  make: (description) => new InsufficientScope({ description })
})

/** 502 `bad_gateway`: The service's handler failed, or its upstream was unreachable or answered badly. */
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", { description: Schema.String }) {}
export const BadGatewayWire = wireError(BadGateway, {
  code: "bad_gateway",
  status: 502,
  identifier: "BadGatewayError",
  summary: "The service's handler failed, or its upstream was unreachable, timed out or did not answer a JSON object.",
  describe: (e) => e.description,
  make: (description) => new BadGateway({ description })
})

/** 429 `invalid_client`: Too many failed client authentications from one address (RFC 6749 §2.3.1), answered with Retry-After. */
export class TooManyAttempts extends Schema.TaggedError<TooManyAttempts>()("TooManyAttempts", { retryAfterSeconds: Schema.Int }) {}
export const TooManyAttemptsWire = wireError(TooManyAttempts, {
  code: "invalid_client",
  status: 429,
  identifier: "TooManyAttemptsError",
  summary: "Too many failed client authentications for this client id from this address; see Retry-After.",
  describe: () => TOO_MANY_ATTEMPTS_DESCRIPTION,
  make: () => new TooManyAttempts({ retryAfterSeconds: 60 })
})

/** 429 `rate_limited`: a client used up its calls of a service's window (`rate_limit`), answered with Retry-After. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  description: Schema.String,
  retryAfterSeconds: Schema.Int
}) {}
export const RateLimitedWire = wireError(RateLimited, {
  code: "rate_limited",
  status: 429,
  identifier: "RateLimitedError",
  summary: "The client made all the calls the service's rate_limit allows in its window; see Retry-After and RateLimit.",
  describe: (error) => error.description,
  make: (description) => new RateLimited({ description, retryAfterSeconds: 1 })
})

/** 429 `too_many_attempts`: Too many failed admin authentications from one address, answered with Retry-After. */
export const ADMIN_TOO_MANY_ATTEMPTS_DESCRIPTION = "Too many failed admin authentication attempts from this address; retry later"
export class AdminTooManyAttempts
  extends Schema.TaggedError<AdminTooManyAttempts>()("AdminTooManyAttempts", { retryAfterSeconds: Schema.Int })
{}
export const AdminTooManyAttemptsWire = wireError(AdminTooManyAttempts, {
  code: "too_many_attempts",
  status: 429,
  identifier: "AdminTooManyAttemptsError",
  summary: "Too many failed admin authentications from this address (AUTH_FAILURE_LIMIT a minute); see Retry-After.",
  describe: () => ADMIN_TOO_MANY_ATTEMPTS_DESCRIPTION,
  make: () => new AdminTooManyAttempts({ retryAfterSeconds: 60 })
})

/** 400 `invalid_dpop_proof` (RFC 9449 §5): the token request's DPoP proof is invalid. */
export class InvalidDpopProof extends Schema.TaggedError<InvalidDpopProof>()("InvalidDpopProof", { description: Schema.String }) {}
export const InvalidDpopProofWire = wireError(InvalidDpopProof, {
  code: "invalid_dpop_proof",
  status: 400,
  identifier: "InvalidDpopProofError",
  summary: "The DPoP header does not hold a valid proof (RFC 9449 §4.3) for this request.",
  describe: (e) => e.description,
  make: (description) => new InvalidDpopProof({ description })
})

/**
 * 403 `unauthorized_client`: a client that authenticated at `POST /oauth/introspect` but was not
 * allowed to introspect by the operator (no `introspect_profiles`). RFC 7662 §4: the endpoint
 * requires callers to be authorized to call it; `{"active":false}` is for an authorized caller.
 */
export class IntrospectionNotAllowed extends Schema.TaggedError<IntrospectionNotAllowed>()("IntrospectionNotAllowed", {}) {}
export const IntrospectionNotAllowedWire = wireError(IntrospectionNotAllowed, {
  code: "unauthorized_client",
  status: 403,
  identifier: "IntrospectionNotAllowedError",
  summary: "The client authenticated, but the operator has not allowed it to introspect tokens (introspect_profiles).",
  describe: () => "This client may not introspect tokens",
  make: () => new IntrospectionNotAllowed()
})

/** Every error's wire schema, by tag: how handlers that write their own answers encode it. */
export const WIRE_ERRORS = {
  InvalidRequest: InvalidRequestWire,
  UnsupportedGrantType: UnsupportedGrantTypeWire,
  InvalidTarget: InvalidTargetWire,
  InvalidClient: InvalidClientWire,
  Unauthorized: UnauthorizedWire,
  NotFound: NotFoundWire,
  Forbidden: ForbiddenWire,
  Conflict: ConflictWire,
  CredentialLimitExceeded: CredentialLimitExceededWire,
  PayloadTooLarge: PayloadTooLargeWire,
  StorageUnavailable: StorageUnavailableWire,
  UpstreamFailing: UpstreamFailingWire,
  InvalidToken: InvalidTokenWire,
  InsufficientScope: InsufficientScopeWire,
  BadGateway: BadGatewayWire,
  TooManyAttempts: TooManyAttemptsWire,
  AdminTooManyAttempts: AdminTooManyAttemptsWire,
  InvalidDpopProof: InvalidDpopProofWire,
  RateLimited: RateLimitedWire,
  IntrospectionNotAllowed: IntrospectionNotAllowedWire
} as const

export type ServiceError = Schema.Schema.Type<(typeof WIRE_ERRORS)[keyof typeof WIRE_ERRORS]>

/** The status and wire body of `error`: what a handler answers, and what a client read to get it. */
export const wireOf = (
  error: ServiceError
): { readonly status: number; readonly body: { readonly error: string; readonly error_description: string } } => {
  const schema = WIRE_ERRORS[error._tag] as unknown as Schema.Schema<
    ServiceError,
    { readonly error: string; readonly error_description: string }
  >
  return { status: HttpApiSchema.getStatusError(schema), body: Schema.encodeSync(schema)(error) }
}
