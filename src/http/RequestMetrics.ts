/**
 * Records every request the HttpApi app answers: its duration by route template, and, for the token
 * endpoint and the service call, the result (the OAuth error code of a failed token request, read
 * back from the answer, so that every way a request can fail, a 500 included, is counted as it was
 * answered). Requests the fast lane answers are recorded there, with the same functions.
 */
import { type HttpApp, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Clock, Effect } from "effect"
import {
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
      recordTokenRequest(response.status === 200 ? "issued" : tokenResultOf(errorCodeOf(response)))
    } else if (request.method === "POST" && route === SERVICE_ROUTE) {
      recordServiceCall(response.status)
    }
    return response
  })
