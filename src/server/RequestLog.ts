/**
 * One debug line per request: method, route template, status and duration, and as fields (what
 * LOG_FORMAT=json shows) the request's id (`RequestId`, what a proxy's upstream gets as
 * X-Request-Id), the route template, the status, the duration and the client address (the TCP
 * peer, or what a trusted proxy forwarded: `ClientAddress`). Never the raw path (its segments are
 * profile names and service uuids, whatever a client sent), the query string, headers or body,
 * which is where secrets and tokens travel. The app logs what it answers (`requestLog`); the hot
 * endpoints' executions (`HotEndpoints`) log what they answer, on either entry, with the same line
 * (`requestLogLine`).
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, FiberRef, Option } from "effect"
import { answeredByExecution } from "./AnsweredByExecution.js"
import { RequestIds } from "./RequestId.js"
import { routeTemplate } from "./Routes.js"

/** The line of one answered request; built only when debug lines are written. */
export const requestLogLine = (
  method: string,
  url: string,
  status: number,
  elapsedMs: number,
  clientAddress: string,
  requestId: string
) =>
  Effect.whenLogLevel(
    Effect.suspend(() => {
      const route = routeTemplate(url.split("?")[0]!) ?? "unknown"
      return Effect.logDebug(`${method} ${route} ${status} ${elapsedMs}ms`).pipe(
        Effect.annotateLogs({
          request_id: requestId,
          method,
          route,
          status,
          duration_ms: elapsedMs,
          client_address: clientAddress
        })
      )
    }),
    "Debug"
  )

export const requestLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | RequestIds> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestIdOf = yield* RequestIds
    const started = yield* Clock.currentTimeMillis
    const response = yield* app
    if (yield* FiberRef.get(answeredByExecution)) return response
    const elapsed = (yield* Clock.currentTimeMillis) - started
    yield* requestLogLine(
      request.method,
      request.url,
      response.status,
      elapsed,
      Option.getOrElse(request.remoteAddress, () => "unknown"),
      requestIdOf(request.source)
    )
    return response
  })
