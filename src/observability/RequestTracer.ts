/**
 * Effect's tracer when traces are exported: `@effect/opentelemetry`'s OTLP tracer (`TracingOtlp`)
 * behind head sampling and the rule that a request is one span.
 *
 * - Sampling is decided where a trace starts here (a span with no parent, or a caller's
 *   `traceparent`), by `HeadSampling`; the spans below follow that decision. A span not sampled is
 *   a `NonRecordingSpan`: nothing is recorded, and its ids (drawn only when something reads them,
 *   for a `traceparent`) continue the trace unsampled.
 * - Inside a request (below a recorded span of kind `server`), the work's own spans (storage, the
 *   cache, SQL statements) are not exported as spans: each becomes an event on the request's span
 *   when it ends (`FoldedSpan`: its name, its attributes and `duration_ms`). The one exception is
 *   the call to a proxy's upstream, marked by `UpstreamCall` in its span's context: a client span
 *   of its own, child of the request's, whose ids the upstream receives.
 *
 * Spans outside requests (start-up, background work) are recorded as they are made.
 */
import { Cause, Context, type Exit, Option, Tracer } from "effect"
import { decide, IdSource, type SamplerSettings, sampledTraceId } from "./HeadSampling.js"

/** In a span's context: the span is a call to a proxy's upstream, exported as a span of its own. */
export class UpstreamCall extends Context.Tag("service-auth/UpstreamCall")<UpstreamCall, true>() {}

/** The upstream call's span: its name. */
export const UPSTREAM_SPAN = "ServiceHandlers.proxy"

/** The upstream call's span, as `Effect.useSpan` takes it: a client span, kept as a span inside its request. */
export const upstreamSpanOptions = (attributes: Readonly<Record<string, unknown>>) => ({
  kind: "client" as const,
  context: Context.make(UpstreamCall, true),
  captureStackTrace: false,
  attributes
})

const NO_ATTRIBUTES: ReadonlyMap<string, unknown> = new Map()

/** A span that is not sampled: it records nothing, but has ids to propagate. */
export class NonRecordingSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly attributes = NO_ATTRIBUTES
  status: Tracer.SpanStatus
  private drawnTraceId: string | undefined
  private drawnSpanId: string | undefined

  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    private readonly ids: IdSource,
    traceId: string | undefined
  ) {
    this.status = { _tag: "Started", startTime }
    this.drawnTraceId = traceId
  }
  get traceId(): string {
    return this.drawnTraceId ??= this.ids.hex(16)
  }
  get spanId(): string {
    return this.drawnSpanId ??= this.ids.hex(8)
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute(): void {}
  event(): void {}
  addLinks(): void {}
}

/**
 * Work inside a request, recorded as an event on the request's span when it ends. It stands for the
 * request's span where ids are read (a child made below it is a child of the request's).
 */
class FoldedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = true
  readonly attributes = new Map<string, unknown>()
  status: Tracer.SpanStatus

  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly links: Array<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    readonly request: Tracer.Span
  ) {
    this.status = { _tag: "Started", startTime }
  }
  get traceId(): string {
    return this.request.traceId
  }
  get spanId(): string {
    return this.request.spanId
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    const startTime = this.status.startTime
    this.status = { _tag: "Ended", startTime, endTime, exit }
    const attributes: Record<string, unknown> = {}
    for (const [key, value] of this.attributes) attributes[key] = value
    attributes["duration_ms"] = Number(endTime - startTime) / 1e6
    if (exit._tag === "Failure" && !Cause.isInterruptedOnly(exit.cause)) {
      attributes["error.type"] = Cause.prettyErrors(exit.cause)[0]?.name ?? "Error"
    }
    this.request.event(this.name, startTime, attributes)
  }
  attribute(key: string, value: unknown): void {
    this.attributes.set(key, value)
  }
  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    this.request.event(name, startTime, attributes)
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
  }
}

/** `inner`'s spans, sampled by `sampler`, one span per request (and one per upstream call). */
export const makeRequestTracer = (inner: Tracer.Tracer, sampler: SamplerSettings): Tracer.Tracer => {
  const ids = new IdSource()
  /** The request each recorded span inside one belongs to (a request's own span: itself). */
  const requestOf = new WeakMap<Tracer.AnySpan, Tracer.Span>()

  const recorded = (span: Tracer.Span): Tracer.Span => {
    if (span.kind === "server") requestOf.set(span, span)
    return span
  }

  const inside = (
    request: Tracer.Span,
    name: string,
    parent: Option.Option<Tracer.AnySpan>,
    context: Context.Context<never>,
    links: Array<Tracer.SpanLink>,
    startTime: bigint,
    kind: Tracer.SpanKind
  ): Tracer.Span => {
    if (Option.isNone(Context.getOption(context, UpstreamCall))) {
      return new FoldedSpan(name, parent, context, links, startTime, kind, request)
    }
    const span = inner.span(name, Option.some(request), context, links, startTime, kind)
    requestOf.set(span, request)
    return span
  }

  return Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      let caller: Tracer.ExternalSpan | undefined
      if (Option.isSome(parent)) {
        const span = parent.value
        if (span instanceof NonRecordingSpan) {
          return new NonRecordingSpan(name, parent, context, links, startTime, kind, ids, span.traceId)
        }
        if (span instanceof FoldedSpan) return inside(span.request, name, parent, context, links.slice(), startTime, kind)
        if (span._tag === "Span") {
          const request = requestOf.get(span)
          if (request !== undefined) return inside(request, name, parent, context, links.slice(), startTime, kind)
          return recorded(inner.span(name, parent, context, links, startTime, kind))
        }
        caller = span
      }
      const decision = decide(
        sampler,
        caller === undefined ? { _tag: "New" } : { _tag: "Caller", traceId: caller.traceId, sampled: caller.sampled }
      )
      if (decision === true) return recorded(inner.span(name, parent, context, links, startTime, kind))
      if (decision === false) return new NonRecordingSpan(name, parent, context, links, startTime, kind, ids, caller?.traceId)
      // A new trace under a ratio: decided on the trace id the tracer draws for it.
      const span = inner.span(name, parent, context, links, startTime, kind)
      return sampledTraceId(sampler, span.traceId)
        ? recorded(span)
        : new NonRecordingSpan(name, parent, context, links, startTime, kind, ids, span.traceId)
    },
    context: (execution, fiber) => inner.context(execution, fiber)
  })
}
