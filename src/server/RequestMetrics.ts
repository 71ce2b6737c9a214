/**
 * Records every request the HttpApi app answers: its duration by route template, and, for the token
 * endpoint and the service call, the result. The hot endpoints' executions (`HotEndpoints`) record
 * what they answer themselves, on either entry; an answer on those routes that no execution made (a
 * defect's 500) is recorded here, its result read back, so every way a request can fail is counted
 * as it was answered.
 */
import { type HttpApp, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Clock, Effect, FiberRef } from "effect"
import { recordDuration, recordServiceCall, recordTokenRequest, tokenResultOf, UNMATCHED_ROUTE } from "../observability/ServiceMetrics.js"
import { answeredByExecution } from "./AnsweredByExecution.js"
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
    if (yield* FiberRef.get(answeredByExecution)) return response
    const elapsed = Number((yield* Clock.currentTimeNanos) - started) / 1e9
    const route = routeTemplate(request.url.split("?")[0]!) ?? UNMATCHED_ROUTE
    recordDuration(route, elapsed)
    if (request.method === "POST" && route === TOKEN_ROUTE) {
      // An answer the execution did not make (a defect's 500): its result read back.
      recordTokenRequest(response.status === 200 ? "issued" : tokenResultOf(errorCodeOf(response)))
    } else if (request.method === "POST" && route === SERVICE_ROUTE) {
      recordServiceCall(response.status)
    }
    return response
  })
