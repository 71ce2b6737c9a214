/**
 * The last line of defence around the whole app: an unknown route answers a JSON 404, and a defect
 * (a bug) answers a JSON 500 without detail while it is logged once. No stack trace or SQL ever
 * reaches a client, and the log never echoes what the client sent (see `describeDefect`).
 */
import { HttpApiBuilder, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect } from "effect"

const notFound = (method: string) =>
  HttpServerResponse.unsafeJson(
    { error: "not_found", error_description: `No ${method} endpoint at this path` },
    { status: 404 }
  )

const internalError = HttpServerResponse.unsafeJson(
  { error: "server_error", error_description: "Internal server error" },
  { status: 500 }
)

const jsonErrors = (app: HttpApp.Default): HttpApp.Default =>
  Effect.catchAllCause(app, (cause) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some" && (failure.value as { _tag?: string })._tag === "RouteNotFound") {
        return notFound(request.method)
      }
      // Typed failures are encoded by HttpApi from the endpoints' error schemas.
      if (failure._tag === "Some" || Cause.isInterruptedOnly(cause)) return yield* Effect.failCause(cause)
      yield* Effect.logError(`Unhandled failure answering a ${request.method} request: ${describeDefect(cause)}`)
      return internalError
    }))

/**
 * What a defect was and where it happened, without anything the client sent: the error's name, its
 * SQLSTATE when it came from the database, and the stack frames. Not its message, which for a
 * database error can quote the offending value (`invalid input syntax for type uuid: "..."`).
 */
export const describeDefect = (cause: Cause.Cause<unknown>): string => {
  const defects = [...Cause.defects(cause), ...Cause.failures(cause)]
  if (defects.length === 0) return "interrupted"
  return defects.map((defect) => {
    if (!(defect instanceof Error)) return `a thrown ${typeof defect}`
    const origin = (defect as { cause?: { code?: unknown } }).cause
    const sqlState = typeof origin?.code === "string" ? ` (SQLSTATE ${origin.code})` : ""
    const frames = (defect.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line)).slice(0, 12)
    return [`${defect.name}${sqlState}`, ...frames].join("\n")
  }).join("\n")
}

/** Installs `jsonErrors` inside HttpApi, where route misses and defects are still failures, not yet responses. */
export const JsonErrorsLive = HttpApiBuilder.middleware(jsonErrors)

/**
 * A 413 is answered before the rest of the body is read; `Connection: close` makes Node end the
 * connection after the answer instead of reading (and discarding) whatever the client still sends.
 */
export const closeAfterPayloadTooLarge = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.map(app, (response) =>
    response.status === 413 ? HttpServerResponse.setHeader(response, "connection", "close") : response)
