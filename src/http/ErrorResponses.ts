/**
 * Error answers written by handlers that build their own responses (the token and service-call
 * endpoints, which add `Cache-Control` or `WWW-Authenticate` headers). The body comes from the
 * same wire schema, and the status from the same annotation, that the OpenAPI document shows.
 */
import { HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { Schema } from "effect"
import { type ServiceError, WIRE_ERRORS } from "../domain/Errors.js"

export const errorResponse = (
  error: ServiceError,
  headers: Readonly<Record<string, string>> = {}
): HttpServerResponse.HttpServerResponse => {
  const schema = WIRE_ERRORS[error._tag] as unknown as Schema.Schema<ServiceError, unknown>
  const retry = error._tag === "StorageUnavailable"
    ? { "retry-after": "1" }
    : error._tag === "TooManyAttempts" || error._tag === "AdminTooManyAttempts"
    ? { "retry-after": String(error.retryAfterSeconds) }
    : {}
  return HttpServerResponse.unsafeJson(Schema.encodeSync(schema)(error), {
    status: HttpApiSchema.getStatusError(schema),
    headers: { ...retry, ...headers }
  })
}
