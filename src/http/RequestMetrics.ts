/**
 * Records every request the HttpApi app answers: its duration by route template, and, for the token
 * endpoint and the service call, the result (the token decision's own result, which the handler
 * notes; an answer no decision made, a 500 included, is read back, so every way a request can fail
 * is counted as it was answered). Requests the fast lane answers are recorded there, with the same functions.
 */
import { type HttpApp, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Clock, Effect, FiberRef } from "effect"
import {
  decidedTokenResult,
  recordDuration,
  recordServiceCall,
  recordTokenRequest,
  tokenResultOf,
  UNMATCHED_ROUTE
} from "../observability/ServiceMetrics.js"
import { endpointTemplate, routeTemplate } from "./Routes.js"

export const TOKEN_ROUTE = endpointTemplate("issueToken")
export const SERVICE_ROUTE = endpointTemplate("callService")

/** The `error` of a JSON error body; undefined when the body is not one. */
const errorCodeOf = (response: HttpServerResponse.HttpServerResponse): string | undefined => {
  if (response.body._tag !== "Uint8Array") return undefined
  try {
    const body: unknown = JSON.parse(new TextDecoder().decode(response.body.body))
    return typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string"
      ? (body as { error: string }).error
      : undefined
  } catch {
    return undefined
  }
}

export const requestMetrics = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const started = yield* Clock.currentTimeNanos
    const response = yield* app
    const elapsed = Number((yield* Clock.currentTimeNanos) - started) / 1e9
    const route = routeTemplate(request.url.split("?")[0]!) ?? UNMATCHED_ROUTE
    recordDuration(route, elapsed)
    if (request.method === "POST" && route === TOKEN_ROUTE) {
      // The decision's result; an answer it did not make (a defect's 500) is read back.
      recordTokenRequest(
        (yield* FiberRef.get(decidedTokenResult)) ??
          (response.status === 200 ? "issued" : tokenResultOf(errorCodeOf(response)))
      )
    } else if (request.method === "POST" && route === SERVICE_ROUTE) {
      recordServiceCall(response.status)
    }
    return response
  })
