/**
 * The wire form of every domain error: exactly `{"error","error_description"}`, with its status.
 * A `Schema.TaggedError` alone would put `_tag` on the wire, so each is a transform from the wire
 * struct to the error class; the distinct literal `error` codes keep the API's error union
 * unambiguous when decoding (e.g. in a generated client).
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import {
  BadGateway,
  Conflict,
  CredentialLimitExceeded,
  InsufficientScope,
  InvalidClient,
  InvalidRequest,
  InvalidToken,
  NotFound,
  PayloadTooLarge,
  StorageUnavailable,
  TooManyAttempts,
  Unauthorized,
  UnsupportedGrantType
} from "../domain/Errors.js"

const wireError = <Self extends { readonly _tag: string }, I, Code extends string>(
  errorClass: Schema.Schema<Self, I>,
  options: {
    readonly code: Code
    readonly status: number
    readonly identifier: string
    readonly describe: (error: Self) => string
    readonly make: (description: string) => Self
    readonly summary: string
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

export const INVALID_REQUEST_DESCRIPTION = "Missing required parameters"
export const UNSUPPORTED_GRANT_TYPE_DESCRIPTION = "Only client_credentials grant type is supported"
export const INVALID_CLIENT_DESCRIPTION = "Invalid client credentials"

export const InvalidRequestWire = wireError(InvalidRequest, {
  code: "invalid_request",
  status: 400,
  identifier: "InvalidRequestError",
  summary: "A parameter is missing, repeated or malformed, or the target does not exist (token endpoint).",
  describe: (e) => e.description,
  make: (description) => new InvalidRequest({ description })
})

export const UnsupportedGrantTypeWire = wireError(UnsupportedGrantType, {
  code: "unsupported_grant_type",
  status: 400,
  identifier: "UnsupportedGrantTypeError",
  summary: "grant_type is not client_credentials.",
  describe: () => UNSUPPORTED_GRANT_TYPE_DESCRIPTION,
  make: () => new UnsupportedGrantType()
})

export const InvalidClientWire = wireError(InvalidClient, {
  code: "invalid_client",
  status: 401,
  identifier: "InvalidClientError",
  summary: "Unknown client id on this service, wrong secret, or deleted credential.",
  describe: () => INVALID_CLIENT_DESCRIPTION,
  make: () => new InvalidClient({ basic: false })
})

export const UnauthorizedWire = wireError(Unauthorized, {
  code: "unauthorized",
  status: 401,
  identifier: "UnauthorizedError",
  summary: "The admin token is missing or wrong.",
  describe: (e) => e.description,
  make: (description) => new Unauthorized({ description })
})

export const NotFoundWire = wireError(NotFound, {
  code: "not_found",
  status: 404,
  identifier: "NotFoundError",
  summary: "The profile, environment, service or credential does not exist.",
  describe: (e) => e.description,
  make: (description) => new NotFound({ description })
})

export const ConflictWire = wireError(Conflict, {
  code: "conflict",
  status: 409,
  identifier: "ConflictError",
  summary: "The request contradicts the stored state.",
  describe: (e) => e.description,
  make: (description) => new Conflict({ description })
})

export const CredentialLimitExceededWire = wireError(CredentialLimitExceeded, {
  code: "credential_limit_exceeded",
  status: 409,
  identifier: "CredentialLimitExceededError",
  summary: "The service would hold more than 2 credentials.",
  describe: (e) => e.description,
  make: (description) => new CredentialLimitExceeded({ description })
})

export const PayloadTooLargeWire = wireError(PayloadTooLarge, {
  code: "invalid_request",
  status: 413,
  identifier: "PayloadTooLargeError",
  summary: "The request body exceeds the size limit.",
  describe: (e) => e.description,
  make: (description) => new PayloadTooLarge({ description })
})

export const StorageUnavailableWire = wireError(StorageUnavailable, {
  code: "temporarily_unavailable",
  status: 503,
  identifier: "TemporarilyUnavailableError",
  summary: "The database cannot be reached; retry later.",
  describe: (e) => e.description,
  make: (description) => new StorageUnavailable({ description })
})

export const InvalidTokenWire = wireError(InvalidToken, {
  code: "invalid_token",
  status: 401,
  identifier: "InvalidTokenError",
  summary: "The access token is missing, malformed, forged, expired, for another service, or revoked.",
  describe: (e) => e.description,
  make: (description) => new InvalidToken({ description })
})

export const InsufficientScopeWire = wireError(InsufficientScope, {
  code: "insufficient_scope",
  status: 403,
  identifier: "InsufficientScopeError",
  summary: "The access token lacks the service:call scope.",
  describe: (e) => e.description,
  make: (description) => new InsufficientScope({ description })
})

export const BadGatewayWire = wireError(BadGateway, {
  code: "bad_gateway",
  status: 502,
  identifier: "BadGatewayError",
  summary: "The service's handler failed, or its upstream was unreachable, timed out or did not answer a JSON object.",
  describe: (e) => e.description,
  make: (description) => new BadGateway({ description })
})

export const TOO_MANY_ATTEMPTS_DESCRIPTION = "Too many failed authentication attempts"

export const TooManyAttemptsWire = wireError(TooManyAttempts, {
  code: "invalid_client",
  status: 429,
  identifier: "TooManyAttemptsError",
  summary: "Too many failed client authentications for this client id from this address; see Retry-After.",
  describe: () => TOO_MANY_ATTEMPTS_DESCRIPTION,
  make: () => new TooManyAttempts({ retryAfterSeconds: 60 })
})
