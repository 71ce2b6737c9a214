/**
 * The server span of each request, in place of the platform's (which records the full URL with its
 * query string and every request and response header): named by the route template
 * (`POST /service/{profile}/{environment}/json/{uuid}`), it continues an incoming W3C `traceparent`
 * (or B3), honouring its sampled flag (`remoteParent`), and records the method, route, path, client
 * address (`ClientAddress`) and status. Never a query string, header or body, where secrets and
 * tokens travel. Nothing at all when the tracer is off. The hot endpoints' server spans are their
 * executions' (`HotEndpoints`), on either entry.
 */
import { type HttpApp, HttpServerError, HttpServerRequest, HttpTraceContext } from "@effect/platform"
import { Context, Effect, FiberRef, Option } from "effect"
import type { IncomingMessage } from "node:http"
import { isEncrypted, remoteParent, serverSpanAttributes } from "./LaneTrace.js"
import { SERVICE_ROUTE, TOKEN_ROUTE } from "./RequestMetrics.js"
import { routeTemplate } from "./Routes.js"

export const requestSpan = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.withFiberRuntime((fiber) => {
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return app
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const path = request.url.split("?")[0]!.slice(0, 200)
    const route = routeTemplate(path)
    if (request.method === "POST" && (route === TOKEN_ROUTE || route === SERVICE_ROUTE)) return app
    return Effect.useSpan(
      route === undefined ? request.method : `${request.method} ${route}`,
      {
        kind: "server",
        parent: Option.getOrUndefined(Option.map(HttpTraceContext.fromHeaders(request.headers), remoteParent)),
        captureStackTrace: false,
        attributes: serverSpanAttributes({
          method: request.method,
          route,
          path,
          encrypted: isEncrypted(request.source as IncomingMessage),
          clientAddress: Option.getOrUndefined(request.remoteAddress)
        })
      },
      (span) =>
        Effect.onExit(Effect.withParentSpan(app, span), (exit) =>
          Effect.sync(() => {
            // Again: the router sets its own form of the route (`/admin/profiles/:profile`) meanwhile.
            if (route !== undefined) span.attribute("http.route", route)
            const status = HttpServerError.exitResponse(exit).status
            span.attribute("http.response.status_code", status)
            if (status >= 500) span.attribute("error.type", String(status))
          }))
    )
  })
