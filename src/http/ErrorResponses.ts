/**
 * Error answers written by handlers that build their own responses (the token and service-call
 * endpoints, which add `Cache-Control` or `WWW-Authenticate` headers). The body comes from the
 * same wire schema, and the status from the same annotation, that the OpenAPI document shows.
 */
import { HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { Schema } from "effect"
import {
  BadGatewayWire,
  ConflictWire,
  CredentialLimitExceededWire,
  InsufficientScopeWire,
  InvalidClientWire,
  InvalidRequestWire,
  InvalidTokenWire,
  NotFoundWire,
  PayloadTooLargeWire,
  StorageUnavailableWire,
  TooManyAttemptsWire,
  UnauthorizedWire,
  UnsupportedGrantTypeWire
} from "../api/WireErrors.js"
import type * as Errors from "../domain/Errors.js"

type DomainError =
  | Errors.BadGateway
  | Errors.Conflict
  | Errors.CredentialLimitExceeded
  | Errors.InsufficientScope
  | Errors.InvalidClient
  | Errors.InvalidRequest
  | Errors.InvalidToken
  | Errors.NotFound
  | Errors.PayloadTooLarge
  | Errors.StorageUnavailable
  | Errors.TooManyAttempts
  | Errors.Unauthorized
  | Errors.UnsupportedGrantType

const WIRE: { readonly [K in DomainError["_tag"]]: Schema.Schema<Extract<DomainError, { _tag: K }>, any> } = {
  BadGateway: BadGatewayWire,
  Conflict: ConflictWire,
  CredentialLimitExceeded: CredentialLimitExceededWire,
  InsufficientScope: InsufficientScopeWire,
  InvalidClient: InvalidClientWire,
  InvalidRequest: InvalidRequestWire,
  InvalidToken: InvalidTokenWire,
  NotFound: NotFoundWire,
  PayloadTooLarge: PayloadTooLargeWire,
  StorageUnavailable: StorageUnavailableWire,
  TooManyAttempts: TooManyAttemptsWire,
  Unauthorized: UnauthorizedWire,
  UnsupportedGrantType: UnsupportedGrantTypeWire
}

export const errorResponse = (
  error: DomainError,
  headers: Readonly<Record<string, string>> = {}
): HttpServerResponse.HttpServerResponse => {
  const schema = WIRE[error._tag] as Schema.Schema<DomainError, unknown>
  const retry = error._tag === "StorageUnavailable"
    ? { "retry-after": "1" }
    : error._tag === "TooManyAttempts"
    ? { "retry-after": String(error.retryAfterSeconds) }
    : {}
  return HttpServerResponse.unsafeJson(Schema.encodeSync(schema)(error), {
    status: HttpApiSchema.getStatusError(schema),
    headers: { ...retry, ...headers }
  })
}
