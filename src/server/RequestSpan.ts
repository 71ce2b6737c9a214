/**
 * The server span of each request the HttpApi app answers, in place of the platform's (which records
 * the full URL with its query string and every request and response header): made by the function
 * the hot endpoints' executions make theirs with (`startRequestSpan`), named by the route template
 * (`POST /admin/profiles/{profile}`), continuing an incoming W3C `traceparent` (or B3) as the
 * sampler says, and recording the method, route, path, client address (`ClientAddress`) and status.
 * Never a query string, header or body, where secrets and tokens travel. Nothing at all when the
 * tracer is off. The hot endpoints' server spans are their executions' (`HotEndpoints`), on either
 * entry: this leaves them alone.
 */
import { type HttpApp, HttpServerError, HttpServerRequest, HttpTraceContext } from "@effect/platform"
import { Context, Effect, FiberRef, Option, Tracer } from "effect"
import type { IncomingMessage } from "node:http"
import { endRequestSpan, isEncrypted, startRequestSpan, wallNanos } from "../observability/LaneTrace.js"
import { SERVICE_ROUTE, TOKEN_ROUTE } from "./RequestMetrics.js"
import { routeTemplate } from "./Routes.js"

export const requestSpan = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.withFiberRuntime((fiber) => {
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return app
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const path = request.url.split("?")[0]!.slice(0, 200)
    const route = routeTemplate(path)
    if (request.method === "POST" && (route === TOKEN_ROUTE || route === SERVICE_ROUTE)) return app
    const span = startRequestSpan(Context.get(fiber.currentDefaultServices, Tracer.Tracer), {
      method: request.method,
      route,
      path,
      encrypted: isEncrypted(request.source as IncomingMessage),
      clientAddress: () => Option.getOrUndefined(request.remoteAddress),
      caller: Option.getOrUndefined(HttpTraceContext.fromHeaders(request.headers))
    }, wallNanos())
    return Effect.onExit(
      Effect.withParentSpan(app, span),
      (exit) =>
        Effect.sync(() => {
          // Again: the router sets its own form of the route (`/admin/profiles/:profile`) meanwhile.
          if (route !== undefined && span.sampled) span.attribute("http.route", route)
          endRequestSpan(span, HttpServerError.exitResponse(exit).status)
        })
    )
  })
