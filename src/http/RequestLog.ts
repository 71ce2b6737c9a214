/**
 * One debug line per request: method, path, status and duration. Never the query string, headers
 * or body, which is where secrets and tokens travel.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Clock, Effect } from "effect"

export const requestLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const started = yield* Clock.currentTimeMillis
    const response = yield* app
    const elapsed = (yield* Clock.currentTimeMillis) - started
    const path = request.url.split("?")[0]!.slice(0, 200)
    yield* Effect.logDebug(`${request.method} ${path} ${response.status} ${elapsed}ms`)
    return response
  })
