/**
 * Error answers written by handlers that build their own responses (the admin API's throttle, and
 * what `Answer.errorAnswer` describes for the token and service-call endpoints). The body comes
 * from the same wire schema, and the status from the same annotation, that the OpenAPI document shows.
 */
import type { HttpServerResponse } from "@effect/platform"
import type { ServiceError } from "../domain/Errors.js"
import { toServerResponse } from "./WriteAnswer.js"
import { errorAnswer } from "../domain/Answer.js"

export const errorResponse = (
  error: ServiceError,
  headers: Readonly<Record<string, string>> = {}
): HttpServerResponse.HttpServerResponse => toServerResponse(errorAnswer(error, headers))
