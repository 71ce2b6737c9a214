/**
 * Effect's tracer when traces are exported: each sampled Effect span is recorded as the OpenTelemetry
 * SDK records a span (`RecordedSpan`: the SDK's rules for attribute, event and link limits, value
 * truncation, exceptions and status) and handed, ended, to the SDK's batch processor and exporter.
 *
 * It replaces `@effect/opentelemetry`'s tracer over the SDK's, which made each span through a
 * wrapper object, an OpenTelemetry context built for the parent, the SDK tracer's `startSpan` (the
 * parent's ids checked by regular expressions, the sampler asked again) and the SDK's span object
 * (two clocks read at its start, its checks of every time it is given). With every request traced,
 * that was about a tenth of a proxied call's time. What that tracer did is kept here, and
 * `test/SdkSpans.test.ts` runs the same Effect programs through both and compares the spans:
 *
 * - parents: an Effect span of this tracer, or an external one (a caller's `traceparent`), whose
 *   trace flags and trace state come from the `OtelTraceFlags` / `OtelTraceState` tags as
 *   `@effect/opentelemetry` reads them (sampled when absent); an invalid parent starts a new trace;
 * - sampling: the decision of `HeadSampling`, which is the SDK sampler's for the same settings (and
 *   which the fast lane takes too); an unsampled span is not recorded, but has ids to propagate;
 * - attribute values as `@effect/opentelemetry` converts them, the status from the span's `Exit`
 *   (a failure's first error recorded as the exception, an interruption flagged), events and links.
 *
 * The OpenTelemetry context is not set around Effect code: no context manager is registered, so
 * `@effect/opentelemetry` did not carry one either.
 */
import {
  type Attributes,
  type AttributeValue,
  type HrTime,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type SpanContext,
  type SpanStatus
} from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, SpanLimits, SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Cause, Context, type Exit, Inspectable, Option, Tracer } from "effect"
import { LaneIdGenerator, sampled, type SamplerSettings, withDrawnTraceId } from "./HeadSampling.js"

export type InstrumentationScope = ReadableSpan["instrumentationScope"]

/** What every span shares: where it goes, what it belongs to, its limits, how it is sampled. */
export interface SdkSpansSettings {
  readonly processor: SpanProcessor
  readonly resource: Resource
  readonly scope: InstrumentationScope
  readonly limits: SpanLimits
  readonly sampler: SamplerSettings
}

/** The tags `@effect/opentelemetry` keeps an external span's trace flags and trace state under. */
const TRACE_FLAGS = Context.GenericTag<"OtelTraceFlags", number>("@effect/opentelemetry/Tracer/OtelTraceFlags")
const TRACE_STATE = Context.GenericTag<"OtelTraceState", SpanContext["traceState"] & {}>(
  "@effect/opentelemetry/Tracer/OtelTraceState"
)

const SAMPLED = 1
const NOT_SAMPLED = 0
const UNSET = 0
const OK = 1
const ERROR = 2

const KIND: Record<Tracer.SpanKind, number> = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 }

const hrTime = (nanos: bigint): [number, number] => [Number(nanos / 1_000_000_000n), Number(nanos % 1_000_000_000n)]

/** An attribute value as `@effect/opentelemetry` hands it to the SDK. */
const attributeValue = (value: unknown): AttributeValue => {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return value
  if (typeof value === "bigint") return value.toString()
  return Inspectable.toStringUnknown(value)
}

const attributesOf = (record: Readonly<Record<string, unknown>>): Attributes => {
  const attributes: Attributes = {}
  for (const [key, value] of Object.entries(record)) attributes[key] = attributeValue(value)
  return attributes
}

/** A tag of the child's context first, then of its parent's (as `@effect/opentelemetry` looks them up). */
const tagOf = <S, A>(tag: Context.Tag<S, A>, span: Tracer.AnySpan, context: Context.Context<never> | undefined) =>
  Option.orElse(context === undefined ? Option.none() : Context.getOption(context, tag), () => Context.getOption(span.context, tag))

/** The span context of a parent, or of a link's span: the SDK span's own for a span of this tracer. */
const spanContextOf = (span: Tracer.AnySpan, context?: Context.Context<never>): SpanContext =>
  span instanceof SdkSpan
    ? span.spanContext
    // As `@effect/opentelemetry` writes it: the trace state key is there even when undefined.
    : {
      traceId: span.traceId,
      spanId: span.spanId,
      isRemote: span._tag === "ExternalSpan",
      traceFlags: Option.getOrElse(tagOf(TRACE_FLAGS, span, context), () => SAMPLED),
      traceState: Option.getOrUndefined(tagOf(TRACE_STATE, span, context))
    } as SpanContext

const linksOf = (links: ReadonlyArray<Tracer.SpanLink>) =>
  links.map((link) => ({ context: spanContextOf(link.span), attributes: attributesOf(link.attributes) }))

type TimedEvent = ReadableSpan["events"][number]

/**
 * A sampled span as the SDK's `SpanImpl` records it, and what the exporter reads of it: the same
 * rules for attributes (the count limit, values cut to the length limit, an empty key or a value
 * of null refused), events and links (their count limits, the oldest dropped first, their own
 * attribute limits), the status (OK is final; only an error keeps its message), exceptions as
 * events, and nothing after the end. What it leaves out is the SDK's diagnostics logger (off
 * unless an embedder sets one) and the clocks the SDK reads when it is given no time: Effect always
 * gives one.
 */
class RecordedSpan implements ReadableSpan {
  readonly attributes: Attributes = {}
  readonly links: Array<Link> = []
  readonly events: Array<TimedEvent> = []
  status: SpanStatus = { code: UNSET }
  endTime: HrTime = [0, 0]
  duration: HrTime = [-1, -1]
  ended = false
  droppedAttributesCount = 0
  droppedEventsCount = 0
  droppedLinksCount = 0
  private attributesCount = 0
  readonly parentSpanContext?: SpanContext

  constructor(
    private readonly settings: SdkSpansSettings,
    private readonly context: SpanContext,
    readonly name: string,
    readonly kind: number,
    parentSpanContext: SpanContext | undefined,
    readonly startTime: HrTime,
    links: ReadonlyArray<Link>
  ) {
    if (parentSpanContext !== undefined) this.parentSpanContext = parentSpanContext
    for (const link of links) this.addLink(link)
    settings.processor.onStart(this as never, ROOT_CONTEXT)
  }

  get resource() {
    return this.settings.resource
  }
  get instrumentationScope() {
    return this.settings.scope
  }
  spanContext(): SpanContext {
    return this.context
  }

  private truncated(value: AttributeValue): AttributeValue {
    const limit = this.settings.limits.attributeValueLengthLimit ?? 0
    if (limit <= 0) return value
    if (typeof value === "string") return value.length <= limit ? value : value.substring(0, limit)
    if (Array.isArray(value)) {
      return value.map((item) => typeof item === "string" && item.length > limit ? item.substring(0, limit) : item) as AttributeValue
    }
    return value
  }

  /** Event and link attributes: the valid ones, cut to the length limit, at most `limit` of them. */
  private limitedAttributes(attributes: Attributes | undefined, limit: number | undefined) {
    const kept: Attributes = {}
    let count = 0
    let dropped = 0
    for (const key in attributes) {
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue
      const value = attributes[key]
      if (key === "" || !isAttributeValue(value)) continue
      if (limit !== undefined && count >= limit) {
        dropped++
        continue
      }
      kept[key] = this.truncated(Array.isArray(value) ? value.slice() as AttributeValue : value)
      count++
    }
    return { kept, count, dropped }
  }

  setAttribute(key: string, value: AttributeValue | undefined): void {
    if (value == null || this.ended || key.length === 0 || !isAttributeValue(value)) return
    const { attributeCountLimit } = this.settings.limits
    const isNewKey = !Object.prototype.hasOwnProperty.call(this.attributes, key)
    if (attributeCountLimit !== undefined && this.attributesCount >= attributeCountLimit && isNewKey) {
      this.droppedAttributesCount++
      return
    }
    this.attributes[key] = this.truncated(value)
    if (isNewKey) this.attributesCount++
  }

  addEvent(name: string, attributes: Attributes | undefined, time: HrTime): void {
    if (this.ended) return
    const { eventCountLimit, attributePerEventCountLimit } = this.settings.limits
    if (eventCountLimit === 0) {
      this.droppedEventsCount++
      return
    }
    if (eventCountLimit !== undefined && this.events.length >= eventCountLimit) {
      this.events.shift()
      this.droppedEventsCount++
    }
    const { kept, dropped } = this.limitedAttributes(attributes, attributePerEventCountLimit)
    this.events.push({ name, attributes: kept, time, droppedAttributesCount: dropped })
  }

  addLink(link: Link): void {
    if (this.ended) return
    const { linkCountLimit, attributePerLinkCountLimit } = this.settings.limits
    if (linkCountLimit === 0) {
      this.droppedLinksCount++
      return
    }
    if (linkCountLimit !== undefined && this.links.length >= linkCountLimit) {
      this.links.shift()
      this.droppedLinksCount++
    }
    const { kept, count, dropped } = this.limitedAttributes(link.attributes, attributePerLinkCountLimit)
    this.links.push({
      context: link.context,
      ...(count > 0 ? { attributes: kept } : {}),
      ...(dropped > 0 ? { droppedAttributesCount: dropped } : {})
    })
  }

  setStatus(status: SpanStatus): void {
    if (this.ended || status.code === UNSET || this.status.code === OK) return
    this.status = status.code === ERROR && typeof status.message === "string"
      ? { code: status.code, message: status.message }
      : { code: status.code }
  }

  /** As the SDK records an exception: an `exception` event with its type, message and stack. */
  recordException(exception: Error & { readonly code?: unknown }, time: HrTime): void {
    const attributes: Attributes = {}
    if (exception.code) attributes["exception.type"] = String(exception.code)
    else if (exception.name) attributes["exception.type"] = exception.name
    if (exception.message) attributes["exception.message"] = exception.message
    if (exception.stack) attributes["exception.stacktrace"] = exception.stack
    if (attributes["exception.type"] || attributes["exception.message"]) this.addEvent("exception", attributes, time)
  }

  end(time: HrTime): void {
    if (this.ended) return
    this.endTime = time
    let seconds = time[0] - this.startTime[0]
    let nanos = time[1] - this.startTime[1]
    if (nanos < 0) {
      seconds -= 1
      nanos += 1_000_000_000
    }
    this.duration = [seconds, nanos]
    if (seconds < 0) {
      this.endTime = [this.startTime[0], this.startTime[1]]
      this.duration = [0, 0]
    }
    this.settings.processor.onEnding?.(this as never)
    this.ended = true
    this.settings.processor.onEnd(this)
  }
}

/** The SDK's check of an attribute value: a primitive, or an array of one type of primitive (and nulls). */
const isAttributeValue = (value: unknown): value is AttributeValue => {
  if (value == null) return true
  if (Array.isArray(value)) {
    let type: string | undefined
    for (const item of value) {
      if (item == null) continue
      if (type === undefined) {
        if (!isPrimitive(item)) return false
        type = typeof item
      } else if (typeof item !== type) return false
    }
    return true
  }
  return isPrimitive(value)
}
const isPrimitive = (value: unknown) => typeof value === "string" || typeof value === "number" || typeof value === "boolean"

class SdkSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled: boolean
  readonly attributes = new Map<string, unknown>()
  readonly spanContext: SpanContext
  status: Tracer.SpanStatus
  /** The SDK span, when the span is sampled (recorded); none otherwise. */
  private readonly recorded: RecordedSpan | undefined

  constructor(
    settings: SdkSpansSettings,
    ids: LaneIdGenerator,
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly links: Array<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    const candidate = Option.isSome(parent) ? spanContextOf(parent.value, context) : undefined
    const parentContext = candidate !== undefined && isSpanContextValid(candidate) ? candidate : undefined
    const isSampled = sampled(
      settings.sampler,
      parentContext === undefined ? undefined : {
        traceId: parentContext.traceId,
        spanId: parentContext.spanId,
        sampled: (parentContext.traceFlags & SAMPLED) === SAMPLED
      }
    )
    const traceId = parentContext?.traceId ?? withDrawnTraceId(() => ids.generateTraceId())
    const spanId = ids.generateSpanId()
    const traceState = parentContext?.traceState
    // As the SDK's tracer writes it.
    this.spanContext = { traceId, spanId, traceFlags: isSampled ? SAMPLED : NOT_SAMPLED, traceState } as SpanContext
    this.traceId = traceId
    this.spanId = spanId
    this.sampled = isSampled
    this.status = { _tag: "Started", startTime }
    this.recorded = isSampled
      ? new RecordedSpan(settings, this.spanContext, name, KIND[kind], parentContext, hrTime(startTime), linksOf(links))
      : undefined
  }

  attribute(key: string, value: unknown): void {
    this.recorded?.setAttribute(key, attributeValue(value))
    this.attributes.set(key, value)
  }

  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
    if (this.recorded !== undefined) for (const link of linksOf(links)) this.recorded.addLink(link)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    this.recorded?.addEvent(name, attributes ? attributesOf(attributes) : undefined, hrTime(startTime))
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", endTime, exit, startTime: this.status.startTime }
    const span = this.recorded
    if (span === undefined) return
    const time = hrTime(endTime)
    if (exit._tag === "Success") {
      span.setStatus({ code: OK })
    } else if (Cause.isInterruptedOnly(exit.cause)) {
      // OK, as `@effect/opentelemetry` sets it; its message (the pretty cause) is one an OK status
      // never keeps, so it is not rendered.
      span.setStatus({ code: OK })
      span.setAttribute("span.label", "⚠︎ Interrupted")
      span.setAttribute("status.interrupted", true)
    } else {
      const firstError = Cause.prettyErrors(exit.cause)[0]
      if (firstError) {
        firstError.stack = Cause.pretty(exit.cause, { renderErrorCause: true })
        span.recordException(firstError, time)
        span.setStatus({ code: ERROR, message: firstError.message })
      } else {
        // An empty cause is no error.
        span.setStatus({ code: OK })
      }
    }
    span.end(time)
  }
}

/** Effect's tracer over `settings`: every span is made by it, on either entry. */
export const makeTracer = (settings: SdkSpansSettings): Tracer.Tracer => {
  const ids = new LaneIdGenerator()
  return Tracer.make({
    span: (name, parent, context, links, startTime, kind) =>
      new SdkSpan(settings, ids, name, parent, context, links.slice(), startTime, kind),
    context: (execution) => execution()
  })
}
