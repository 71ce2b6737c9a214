/**
 * How a call of the admin API's client can fail, each with the sentence the operator reads
 * (`AdminClient.describeFailure` makes them): the server's refusal, no answer, or an answer that is
 * not the admin API's.
 */
import { Schema } from "effect"
import type { AdminTokenMissing } from "./AdminTokenSource.js"
import type { InvalidServerUrl } from "./ServerAddress.js"

/** The server answered outside 2xx with the contract's error body. */
export class AdminApiError extends Schema.TaggedError<AdminApiError>()("AdminApiError", {
  status: Schema.Number,
  error: Schema.String,
  message: Schema.String
}) {}

/** No answer: connection refused, unknown host, TLS, timeout. */
export class ServerUnreachable extends Schema.TaggedError<ServerUnreachable>()("ServerUnreachable", {
  message: Schema.String
}) {}

/** An answer that is not the admin API's (a proxy's error page, another server at that URL). */
export class UnexpectedAnswer extends Schema.TaggedError<UnexpectedAnswer>()("UnexpectedAnswer", {
  status: Schema.Number,
  message: Schema.String
}) {}

export type AdminCallError = AdminApiError | ServerUnreachable | UnexpectedAnswer
export type AdminSetupError = AdminTokenMissing | InvalidServerUrl

/** Transport and 5xx failures, which a later attempt may not meet (rotate keeps polling through them). */
export const isTransient = (error: AdminCallError): boolean => error._tag === "ServerUnreachable" || error.status >= 500
