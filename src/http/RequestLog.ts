/**
 * One debug line per request: method, path, status and duration, and as fields (what LOG_FORMAT=json
 * shows) a request id, the route template, the status, the duration and the client address (the TCP
 * peer, or what a trusted proxy forwarded: `ClientAddress`). Never the query string, headers or
 * body, which is where secrets and tokens travel.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { routeTemplate } from "./Routes.js"

export const requestLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const started = yield* Clock.currentTimeMillis
    const response = yield* app
    const elapsed = (yield* Clock.currentTimeMillis) - started
    const path = request.url.split("?")[0]!.slice(0, 200)
    // Built only when debug lines are written: the id and the route cost something on every request.
    yield* Effect.whenLogLevel(
      Effect.suspend(() =>
        Effect.logDebug(`${request.method} ${path} ${response.status} ${elapsed}ms`).pipe(
          Effect.annotateLogs({
            request_id: randomBytes(8).toString("hex"),
            method: request.method,
            route: routeTemplate(path) ?? "unknown",
            status: response.status,
            duration_ms: elapsed,
            client_address: Option.getOrElse(request.remoteAddress, () => "unknown")
          })
        )
      ),
      "Debug"
    )
    return response
  })
