/**
 * Spans made on the fast path itself (`FastLane`), through the same Effect tracer the app uses (the
 * OpenTelemetry exporter, which samples per OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG; see
 * `TracingOtlp`). They have the names and attributes of the app's spans, `requestSpan` and below.
 *
 * The server span is asked for first; when the sampler says no (or the caller's `traceparent` says
 * not sampled, under a parent-based sampler), nothing else is built for that request: no attribute,
 * no child span. A sampled-out request costs one unrecorded span.
 */
import { Context, Exit, Option, Tracer } from "effect"
import type { IncomingMessage } from "node:http"

/** Tracing on the fast path: the tracer, or undefined when traces are not exported. */
export type LaneTracer = Tracer.Tracer | undefined

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * Where @effect/opentelemetry reads a remote parent's trace flags (it takes "sampled" when they are
 * absent, whatever the span's `sampled` says): the same key, so that OpenTelemetry's modules need
 * not be loaded to name it.
 */
const OTEL_TRACE_FLAGS = Context.GenericTag<"OtelTraceFlags", number>("@effect/opentelemetry/Tracer/OtelTraceFlags")

/** A caller's span whose sampled flag the parent-based samplers see. */
export const remoteParent = (parent: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean }) =>
  Tracer.externalSpan({
    traceId: parent.traceId,
    spanId: parent.spanId,
    sampled: parent.sampled,
    context: Context.make(OTEL_TRACE_FLAGS, parent.sampled ? 1 : 0)
  })

/** The caller's span from a W3C `traceparent` (an invalid one is ignored, as the specification says). */
const callerSpan = (header: string | undefined): Option.Option<Tracer.AnySpan> => {
  const match = header === undefined ? null : TRACEPARENT.exec(header.trim())
  if (match === null || match[1] === "ff" || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return Option.none()
  return Option.some(remoteParent({ traceId: match[2]!, spanId: match[3]!, sampled: (parseInt(match[4]!, 16) & 1) === 1 }))
}

const nowNanos = () => process.hrtime.bigint()
/** hrtime is not wall-clock time: spans take the wall clock, at nanosecond resolution from hrtime. */
const EPOCH_OFFSET = BigInt(Date.now()) * 1_000_000n - nowNanos()
export const wallNanos = (hr: bigint = nowNanos()) => hr + EPOCH_OFFSET

/**
 * The server span of a request to `route`, continuing its `traceparent`; undefined when not sampled.
 * `startedHr` is `process.hrtime.bigint()` at the request's arrival.
 */
export const serverSpan = (
  tracer: LaneTracer,
  request: IncomingMessage,
  route: string,
  path: string,
  startedHr: bigint
): Tracer.Span | undefined => {
  if (tracer === undefined) return undefined
  const traceparent = request.headers["traceparent"]
  const span = tracer.span(
    `POST ${route}`,
    callerSpan(Array.isArray(traceparent) ? traceparent[0] : traceparent),
    Context.empty(),
    [],
    wallNanos(startedHr),
    "server"
  )
  if (!span.sampled) return undefined
  span.attribute("http.request.method", "POST")
  span.attribute("http.route", route)
  span.attribute("url.path", path.slice(0, 200))
  span.attribute("url.scheme", "http")
  if (request.socket.remoteAddress !== undefined) span.attribute("client.address", request.socket.remoteAddress)
  return span
}

/** A child of a sampled span, started now. */
export const childSpan = (
  tracer: LaneTracer,
  parent: Tracer.Span,
  name: string,
  attributes: Readonly<Record<string, unknown>> = {},
  kind: Tracer.SpanKind = "internal"
): Tracer.Span => {
  const span = tracer!.span(name, Option.some(parent), Context.empty(), [], wallNanos(), kind)
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
