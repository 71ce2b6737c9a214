/**
 * Spans made on the fast path itself (`FastLane`), through the same Effect tracer the app uses (the
 * OpenTelemetry exporter; see `TracingOtlp`). They have the names and attributes of the app's spans,
 * `requestSpan` and below.
 *
 * Head sampling is decided first (`HeadSampling`, from OTEL_TRACES_SAMPLER and
 * OTEL_TRACES_SAMPLER_ARG, honouring the caller's `traceparent` under a parent-based sampler); a
 * request it says no to gets no span object, no attribute, no child span. Only what W3C propagation
 * needs is made for it, and only when needed (`unsampledSpan`: an upstream to call, or work in
 * Effect whose spans must not start traces of their own).
 */
import { Context, Exit, Option, Tracer } from "effect"
import type { IncomingMessage } from "node:http"
import type { TLSSocket } from "node:tls"
import { type CallerContext, randomHexId, sampled, type SamplerSettings, withDrawnTraceId } from "../observability/HeadSampling.js"
import { clientAddress } from "./ClientAddress.js"

/** Tracing on the fast path: the tracer and the sampler settings, or undefined when traces are not exported. */
export type LaneTracer = { readonly tracer: Tracer.Tracer; readonly sampler: SamplerSettings } | undefined

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * Where @effect/opentelemetry reads a remote parent's trace flags (it takes "sampled" when they are
 * absent, whatever the span's `sampled` says): the same key, so that OpenTelemetry's modules need
 * not be loaded to name it.
 */
const OTEL_TRACE_FLAGS = Context.GenericTag<"OtelTraceFlags", number>("@effect/opentelemetry/Tracer/OtelTraceFlags")

/** A caller's span whose sampled flag the parent-based samplers see. */
export const remoteParent = (parent: CallerContext) =>
  Tracer.externalSpan({
    traceId: parent.traceId,
    spanId: parent.spanId,
    sampled: parent.sampled,
    context: Context.make(OTEL_TRACE_FLAGS, parent.sampled ? 1 : 0)
  })

/** The caller's context from a W3C `traceparent` (an invalid one is ignored, as the specification says). */
const callerOf = (request: IncomingMessage): CallerContext | undefined => {
  const header = request.headers["traceparent"]
  if (header === undefined) return undefined
  const match = TRACEPARENT.exec((Array.isArray(header) ? header[0] ?? "" : header).trim())
  if (match === null || match[1] === "ff" || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return undefined
  return { traceId: match[2]!, spanId: match[3]!, sampled: (parseInt(match[4]!, 16) & 1) === 1 }
}

const nowNanos = () => process.hrtime.bigint()
/** hrtime is not wall-clock time: spans take the wall clock, at nanosecond resolution from hrtime. */
const EPOCH_OFFSET = BigInt(Date.now()) * 1_000_000n - nowNanos()
export const wallNanos = (hr: bigint = nowNanos()) => hr + EPOCH_OFFSET

/**
 * A server span's attributes, on either entry (the app's `requestSpan` and the fast lane): the
 * method, the route template, the path (at most 200 characters), the scheme the request came over,
 * and the client address as `ClientAddress` resolves it through TRUSTED_PROXIES.
 */
export const serverSpanAttributes = (request: {
  readonly method: string
  readonly route: string | undefined
  readonly path: string
  readonly encrypted: boolean
  readonly clientAddress: string | undefined
}): Record<string, string> => ({
  "http.request.method": request.method,
  ...(request.route === undefined ? {} : { "http.route": request.route }),
  "url.path": request.path.slice(0, 200),
  "url.scheme": request.encrypted ? "https" : "http",
  ...(request.clientAddress === undefined ? {} : { "client.address": request.clientAddress })
})

/** Whether a request came over TLS (`NodeServer` with TLS_CERT_FILE). */
export const isEncrypted = (request: IncomingMessage): boolean => (request.socket as Partial<TLSSocket>).encrypted === true

/**
 * The server span of a request to `route`, continuing its `traceparent`; undefined when not sampled.
 * `startedHr` is `process.hrtime.bigint()` at the request's arrival.
 */
export const serverSpan = (
  lane: LaneTracer,
  request: IncomingMessage,
  route: string,
  path: string,
  startedHr: bigint
): Tracer.Span | undefined => {
  if (lane === undefined) return undefined
  const caller = callerOf(request)
  if (!sampled(lane.sampler, caller)) return undefined
  const span = withDrawnTraceId(() =>
    lane.tracer.span(
      `POST ${route}`,
      caller === undefined ? Option.none() : Option.some(remoteParent(caller)),
      Context.empty(),
      [],
      wallNanos(startedHr),
      "server"
    )
  )
  const attributes = serverSpanAttributes({
    method: "POST",
    route,
    path,
    encrypted: isEncrypted(request),
    clientAddress: request.socket.remoteAddress === undefined ? undefined : clientAddress(request)
  })
  for (const key in attributes) span.attribute(key, attributes[key])
  return span
}

/**
 * What stands for the server span of a request that is not sampled, where propagation needs one: the
 * caller's trace (or a new one) and a span id of its own, flagged not sampled, as OpenTelemetry's
 * non-recording span is. An upstream continues that trace unsampled; spans made below it in Effect
 * follow the sampler's decision for it instead of starting traces of their own.
 */
export const unsampledSpan = (request: IncomingMessage): Tracer.ExternalSpan => {
  const caller = callerOf(request)
  return remoteParent({ traceId: caller?.traceId ?? randomHexId(16), spanId: randomHexId(8), sampled: false })
}

/** A child of a sampled span, started now. */
export const childSpan = (
  lane: LaneTracer,
  parent: Tracer.Span,
  name: string,
  attributes: Readonly<Record<string, unknown>> = {},
  kind: Tracer.SpanKind = "internal"
): Tracer.Span => {
  const span = lane!.tracer.span(name, Option.some(parent), Context.empty(), [], wallNanos(), kind)
  for (const [key, value] of Object.entries(attributes)) span.attribute(key, value)
  return span
}

export const endSpan = (span: Tracer.Span | undefined) => span?.end(wallNanos(), Exit.void)

/** Ends a server span with the answer's status, as `requestSpan` does. */
export const endServerSpan = (span: Tracer.Span | undefined, status: number) => {
  if (span === undefined) return
  span.attribute("http.response.status_code", status)
  if (status >= 500) span.attribute("error.type", String(status))
  endSpan(span)
}
