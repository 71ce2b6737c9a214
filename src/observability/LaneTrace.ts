/**
 * The spans of a request, made by the same functions wherever a request is answered (the hot
 * endpoints' executions, `TokenExecution` and `ServiceCallExecution`, on either entry, and
 * `RequestSpan` for the app's other routes): the server span (`startRequestSpan`, `endRequestSpan`)
 * and, for a proxy, the upstream call's client span (`startUpstreamSpan`, built from
 * `RequestTracer.upstreamSpanOptions`). What the request's work did (its service and client, the
 * cache's answer, the handler, the signature, storage) is recorded on the server span as attributes
 * and events (`observability/RequestTracer`).
 *
 * Head sampling is the tracer's (`RequestTracer`): a request that is not sampled gets a span that
 * records nothing and whose ids, drawn only if read, continue the trace unsampled in the upstream's
 * `traceparent`.
 */
import { Context, Exit, Option, Tracer } from "effect"
import type { IncomingMessage } from "node:http"
import type { TLSSocket } from "node:tls"
import { clientAddress } from "../server/ClientAddress.js"
import { upstreamAttributes } from "../service-call/ServiceHandlers.js"
import { UPSTREAM_SPAN, upstreamSpanOptions } from "./RequestTracer.js"
import { wallNanos } from "./WallClock.js"

/** The tracer on the fast path, or undefined when traces are not exported. */
export type LaneTracer = Tracer.Tracer | undefined

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** A caller's span, from a W3C `traceparent` (an invalid one is ignored, as the specification says). */
export const callerOf = (request: IncomingMessage): Tracer.ExternalSpan | undefined => {
  const header = request.headers["traceparent"]
  if (header === undefined) return undefined
  const match = TRACEPARENT.exec((Array.isArray(header) ? header[0] ?? "" : header).trim())
  if (match === null || match[1] === "ff" || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return undefined
  return Tracer.externalSpan({ traceId: match[2]!, spanId: match[3]!, sampled: (parseInt(match[4]!, 16) & 1) === 1 })
}

export { wallNanos }

/** Whether a request came over TLS (`NodeServer` with TLS_CERT_FILE). */
export const isEncrypted = (request: IncomingMessage): boolean => (request.socket as Partial<TLSSocket>).encrypted === true

/** What a server span records of its request. */
export interface RequestFacts {
  readonly method: string
  /** The route template, when the path is one of the API's. */
  readonly route: string | undefined
  readonly path: string
  readonly encrypted: boolean
  /** As `ClientAddress` resolves it through TRUSTED_PROXIES: asked only of a request that is sampled. */
  readonly clientAddress: () => string | undefined
  /** The caller's span, from its `traceparent` (or B3). */
  readonly caller: Tracer.ExternalSpan | undefined
}

/**
 * The server span of a request, on either entry, started at `startNanos` (wall clock): named by the
 * route template, continuing the caller's trace, with the method, route, path (at most 200
 * characters), scheme and client address. Never a query string, header or body.
 */
export const startRequestSpan = (tracer: Tracer.Tracer, facts: RequestFacts, startNanos: bigint): Tracer.Span => {
  const span = tracer.span(
    facts.route === undefined ? facts.method : `${facts.method} ${facts.route}`,
    facts.caller === undefined ? Option.none() : Option.some(facts.caller),
    Context.empty(),
    [],
    startNanos,
    "server"
  )
  if (!span.sampled) return span
  span.attribute("http.request.method", facts.method)
  if (facts.route !== undefined) span.attribute("http.route", facts.route)
  span.attribute("url.path", facts.path.slice(0, 200))
  span.attribute("url.scheme", facts.encrypted ? "https" : "http")
  const address = facts.clientAddress()
  if (address !== undefined) span.attribute("client.address", address)
  return span
}

/** A hot endpoint's server span of a POST to `route`, arrived at `startedHr` (`process.hrtime.bigint()`). */
export const laneRequestSpan = (
  tracer: LaneTracer,
  request: IncomingMessage,
  route: string,
  path: string,
  startedHr: bigint
): Tracer.Span | undefined =>
  tracer === undefined ? undefined : startRequestSpan(tracer, {
    method: "POST",
    route,
    path,
    encrypted: isEncrypted(request),
    clientAddress: () => request.socket.remoteAddress === undefined ? undefined : clientAddress(request),
    caller: callerOf(request)
  }, wallNanos(startedHr))

/** Ends a server span with the answer's status (and `error.type` for a 5xx). */
export const endRequestSpan = (span: Tracer.Span | undefined, status: number, endNanos: bigint = wallNanos()) => {
  if (span === undefined) return
  if (span.sampled) {
    span.attribute("http.response.status_code", status)
    if (status >= 500) span.attribute("error.type", String(status))
  }
  span.end(endNanos, Exit.void)
}

/** Records `attributes` on a request's span, when it is recorded. */
export const annotateRequest = (span: Tracer.Span | undefined, attributes: Readonly<Record<string, unknown>>) => {
  if (span === undefined || !span.sampled) return
  for (const key in attributes) span.attribute(key, attributes[key])
}

/** A catalogue read the cache answered: an event on the request's span, as the cache's own reads record theirs. */
export const cacheHitEvent = (span: Tracer.Span | undefined, name: string) => {
  if (span !== undefined && span.sampled) span.event(name, wallNanos(), { "cache.hit": true })
}

/**
 * The upstream call's span below `parent`, started now (`upstreamSpanOptions` outside Effect). Below
 * a request that is not sampled it records nothing, so its attributes (a parse of the URL) are not
 * worked out.
 */
export const startUpstreamSpan = (tracer: Tracer.Tracer, parent: Tracer.Span, url: string): Tracer.Span => {
  if (!parent.sampled) return tracer.span(UPSTREAM_SPAN, Option.some(parent), Context.empty(), [], wallNanos(), "client")
  const options = upstreamSpanOptions(upstreamAttributes(url))
  const span = tracer.span(UPSTREAM_SPAN, Option.some(parent), options.context, [], wallNanos(), options.kind)
  annotateRequest(span, options.attributes)
  return span
}

/** Ends the upstream call's span with the upstream's status, when it answered. */
export const endUpstreamSpan = (span: Tracer.Span | undefined, status: number | undefined) => {
  if (span === undefined) return
  if (status !== undefined && span.sampled) span.attribute("http.response.status_code", status)
  span.end(wallNanos(), Exit.void)
}
