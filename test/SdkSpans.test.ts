/**
 * `SdkSpans` (Effect's tracer when traces are exported) against `@effect/opentelemetry`'s tracer over
 * the same SDK provider, which it replaced: the same Effect programs end the same spans. Names,
 * kinds, parents, trace flags and state, attributes, status, events (exceptions included), links,
 * dropped counts, resource and scope are compared; ids are compared by where they appear, times
 * not at all. Both sides read the span limits from the same OTEL_* variables.
 */
import * as Resource from "@effect/opentelemetry/Resource"
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import { TraceState } from "@opentelemetry/core"
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler
} from "@opentelemetry/sdk-trace-base"
import { Cause, Context, Effect, Fiber, Layer, Tracer } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { LaneIdGenerator, samplerSettings, type SamplerSettings } from "../src/observability/HeadSampling.js"
import { layerSpans } from "../src/observability/TracingOtlp.js"
import { remoteParent } from "../src/http/LaneTrace.js"

const resource = Resource.layer({ serviceName: "service-auth", serviceVersion: "0.1.0" })

/** Every span exported, kept past the exporter's shutdown (the in-memory exporter forgets them then). */
const collecting = () => {
  const spans: Array<ReadableSpan> = []
  const exporter: SpanExporter = {
    export: (batch, done) => {
      spans.push(...batch)
      done({ code: 0 })
    },
    shutdown: () => Promise.resolve()
  }
  return { spans, processor: new SimpleSpanProcessor(exporter) }
}

/** The SDK's sampler for the settings, as the server configured its provider before `SdkSpans`. */
const samplerOf = ({ name, ratio }: SamplerSettings): Sampler => {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler()
    case "always_off":
      return new AlwaysOffSampler()
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio)
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
  }
}

/** The tracer before: `@effect/opentelemetry`'s, over an SDK provider configured as the server's was. */
const referenceLayer = (sampler: SamplerSettings, processor: SpanProcessor) =>
  OtelTracer.layer.pipe(
    Layer.provide(Layer.effect(OtelTracer.OtelTracerProvider, Effect.map(Resource.Resource, (resource) =>
      new BasicTracerProvider({
        resource,
        sampler: samplerOf(sampler),
        idGenerator: new LaneIdGenerator(),
        spanProcessors: [processor]
      })))),
    Layer.provide(resource),
    Layer.discard
  )

const sdkSpansLayer = (sampler: SamplerSettings, processor: SpanProcessor) =>
  layerSpans(sampler, processor).pipe(Layer.provide(resource))

const run = async <A, E>(
  program: Effect.Effect<A, E>,
  layerOf: (sampler: SamplerSettings, processor: SpanProcessor) => Layer.Layer<never>,
  sampler: SamplerSettings
) => {
  const { spans, processor } = collecting()
  await Effect.runPromise(Effect.exit(program).pipe(Effect.provide(layerOf(sampler, processor))))
  await processor.forceFlush()
  return spans
}

/** A span as far as it can be compared: ids by their order of appearance, no times, no line numbers. */
const comparable = (spans: Array<ReadableSpan>) => {
  const ids = new Map<string, string>()
  const id = (value: string | undefined) => {
    if (value === undefined) return undefined
    if (!ids.has(value)) ids.set(value, `#${ids.size}`)
    return ids.get(value)
  }
  const context = (c: ReturnType<ReadableSpan["spanContext"]> | undefined) =>
    c === undefined ? undefined : {
      traceId: id(c.traceId),
      spanId: id(c.spanId),
      traceFlags: c.traceFlags,
      isRemote: c.isRemote,
      traceState: c.traceState?.serialize()
    }
  const text = (value: unknown) => typeof value === "string" ? value.replace(/:\d+:\d+/g, ":L:C").replace(/#\d+/g, "#N") : value
  const attributes = (a: Record<string, unknown> | undefined) =>
    a === undefined ? undefined : Object.fromEntries(Object.entries(a).map(([k, v]) => [k, text(v)]))
  return spans.map((span) => ({
    name: span.name,
    kind: span.kind,
    context: context(span.spanContext()),
    parent: context(span.parentSpanContext),
    attributes: attributes(span.attributes),
    status: { code: span.status.code, message: text(span.status.message) },
    events: span.events.map((event) => ({ name: event.name, attributes: attributes(event.attributes), dropped: event.droppedAttributesCount })),
    links: span.links.map((link) => ({ context: context(link.context), attributes: attributes(link.attributes), dropped: link.droppedAttributesCount })),
    dropped: [span.droppedAttributesCount, span.droppedEventsCount, span.droppedLinksCount],
    resource: span.resource.attributes,
    scope: { name: span.instrumentationScope.name, version: span.instrumentationScope.version }
  }))
}

/** Runs `program` with both tracers; the spans must compare equal. Returns them. */
const expectSameSpans = async <A, E>(program: Effect.Effect<A, E>, sampler = samplerSettings(undefined, undefined)) => {
  const before = comparable(await run(program, referenceLayer, sampler))
  const after = comparable(await run(program, sdkSpansLayer, sampler))
  expect(after).toEqual(before)
  return after
}

const CALLER = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331" }

const request = Effect.void.pipe(
  Effect.withSpan("CredentialRepoCache.findServiceRoute", { attributes: { "cache.hit": true } }),
  Effect.andThen(Effect.void.pipe(Effect.withSpan("ServiceHandlers.proxy", {
    kind: "client",
    attributes: { "server.address": "127.0.0.1", "server.port": 4000, ratio: 0.25, big: 10n, list: [1, "a"], nothing: null, record: { a: 1 } }
  }))),
  Effect.tap(() => Effect.annotateCurrentSpan("service_auth.client_id", "abc")),
  Effect.withSpan("ServiceHttp.callService")
)

describe("the same spans as @effect/opentelemetry's tracer over the SDK", () => {
  afterEach(() => {
    for (const name of Object.keys(process.env)) if (name.startsWith("OTEL_SPAN_") || name.startsWith("OTEL_ATTRIBUTE_")) delete process.env[name]
  })

  it("nested spans with every kind of attribute value, a root of their own", async () => {
    const spans = await expectSameSpans(request.pipe(Effect.withSpan("POST /service/{profile}/{environment}/json/{uuid}", { kind: "server" })))
    expect(spans).toHaveLength(4)
    expect(spans.find((span) => span.name === "ServiceHandlers.proxy")!.attributes).toMatchObject({ big: "10", nothing: "null" })
  })

  it("below a caller's span: sampled, not sampled, with trace state, with no flags, invalid", async () => {
    const parents = [
      remoteParent({ ...CALLER, sampled: true }),
      remoteParent({ ...CALLER, sampled: false }),
      OtelTracer.makeExternalSpan({ ...CALLER, traceFlags: 1, traceState: "vendor=value,other=1" }),
      Tracer.externalSpan({ ...CALLER, sampled: false }),
      Tracer.externalSpan({ traceId: "not-hex", spanId: "zz", sampled: true }),
      Tracer.externalSpan({ traceId: "0".repeat(32), spanId: "0".repeat(16), sampled: true })
    ]
    for (const parent of parents) {
      for (const sampler of ["parentbased_always_on", "parentbased_always_off", "always_on", "always_off"]) {
        await expectSameSpans(request.pipe(Effect.withSpan("server", { kind: "server", parent })), samplerSettings(sampler, undefined))
      }
    }
  })

  it("sampling by trace id ratio: the decision follows the trace id, and children follow their root", async () => {
    for (const [sampler, ratio] of [["traceidratio", "0"], ["traceidratio", "1"], ["parentbased_traceidratio", "0"], ["parentbased_traceidratio", "1"]] as const) {
      await expectSameSpans(request.pipe(Effect.withSpan("root")), samplerSettings(sampler, ratio))
      await expectSameSpans(request.pipe(Effect.withSpan("server", { parent: remoteParent({ ...CALLER, sampled: true }) })), samplerSettings(sampler, ratio))
    }
    // At one half, what each side exported must agree with its own trace ids the way the SDK decides.
    const half = samplerSettings("parentbased_traceidratio", "0.5")
    const spans = await run(Effect.forEach(Array.from({ length: 40 }), () => request.pipe(Effect.withSpan("root"))), sdkSpansLayer, half)
    const roots = spans.filter((span) => span.name === "root")
    expect(roots.length).toBeGreaterThan(5)
    expect(roots.length).toBeLessThan(35)
    for (const root of roots) {
      const children = spans.filter((span) => span.spanContext().traceId === root.spanContext().traceId)
      expect(children).toHaveLength(4)
      expect(samplerOf(half).shouldSample(
        // The SDK's sampler on the same trace id: a root, no parent.
        (await import("@opentelemetry/api")).ROOT_CONTEXT, root.spanContext().traceId, "root", 0, {}, []
      ).decision).toBe(2)
    }
  })

  it("a failure records the first error as an exception event, with an error status", async () => {
    const spans = await expectSameSpans(
      Effect.fail(new Error("upstream said \"no\"")).pipe(Effect.withSpan("ServiceHandlers.proxy"), Effect.withSpan("outer"))
    )
    expect(spans[0]!.events.map((event) => event.name)).toEqual(["exception"])
    expect(spans[0]!.status.code).toBe(2)
  })

  it("a defect, a typed failure that is not an Error, an empty cause, and an interruption", async () => {
    await expectSameSpans(Effect.die("boom").pipe(Effect.withSpan("defect")))
    await expectSameSpans(Effect.fail({ reason: "not an error" }).pipe(Effect.withSpan("typed")))
    await expectSameSpans(Effect.failCause(Cause.empty).pipe(Effect.withSpan("empty")))
    const spans = await expectSameSpans(Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.never.pipe(Effect.withSpan("interrupted")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
    }))
    expect(spans[0]!.attributes).toMatchObject({ "status.interrupted": true })
  })

  it("links at the start and added later, and events (log lines in a span)", async () => {
    const linked = OtelTracer.makeExternalSpan({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 0, traceState: "congo=t61rcWkgMzE" })
    const spans = await expectSameSpans(
      Effect.gen(function*() {
        yield* Effect.logInfo("inside", { detail: 1 })
        const span = yield* Effect.currentSpan
        span.addLinks([{ _tag: "SpanLink", span: Tracer.externalSpan({ ...CALLER, sampled: true }), attributes: { why: "later" } }])
      }).pipe(Effect.withSpan("linked", { links: [{ _tag: "SpanLink", span: linked, attributes: { reason: "retry", attempt: 2 } }] }))
    )
    expect(spans[0]!.links).toHaveLength(2)
    expect(spans[0]!.events.length).toBeGreaterThan(0)
  })

  it("a span that asks to be a root starts a trace of its own", async () => {
    const spans = await expectSameSpans(Effect.void.pipe(Effect.withSpan("own root", { root: true }), Effect.withSpan("outer")))
    expect(spans[0]!.parent).toBeUndefined()
    expect(spans[0]!.context!.traceId).not.toBe(spans[1]!.context!.traceId)
  })

  it("span limits from the OTEL_* variables: attributes, their length, events and links", async () => {
    process.env.OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT = "3"
    process.env.OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT = "4"
    process.env.OTEL_SPAN_EVENT_COUNT_LIMIT = "1"
    process.env.OTEL_SPAN_LINK_COUNT_LIMIT = "1"
    process.env.OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT = "1"
    const spans = await expectSameSpans(
      Effect.gen(function*() {
        for (let index = 0; index < 6; index++) yield* Effect.annotateCurrentSpan(`key${index}`, `value ${index}`)
        yield* Effect.logInfo("one", { a: 1, b: 2 })
        yield* Effect.logInfo("two")
        const span = yield* Effect.currentSpan
        span.addLinks([{ _tag: "SpanLink", span: Tracer.externalSpan({ ...CALLER, sampled: true }), attributes: {} }])
        span.addLinks([{ _tag: "SpanLink", span: Tracer.externalSpan({ ...CALLER, sampled: true }), attributes: {} }])
      }).pipe(Effect.withSpan("limited", { attributes: { long: "a value longer than four" } }))
    )
    const [attributes, events, links] = spans[0]!.dropped
    expect([attributes! > 0, events, links]).toEqual([true, 1, 1])
    expect(Object.keys(spans[0]!.attributes!)).toHaveLength(3)
    expect(spans[0]!.attributes).toMatchObject({ long: "a va" })
  })

  it("the trace state of a caller reaches every span below it", async () => {
    const parent = OtelTracer.makeExternalSpan({ ...CALLER, traceFlags: 1, traceState: new TraceState("a=1") })
    const spans = await expectSameSpans(request.pipe(Effect.withSpan("server", { parent })))
    expect(spans.every((span) => span.context!.traceState === "a=1")).toBe(true)
  })

  it("what a span holds for Effect: ids, sampled flag, attributes and status", async () => {
    const seen: Array<Tracer.Span> = []
    const program = Effect.gen(function*() {
      const span = yield* Effect.currentSpan
      seen.push(span)
      yield* Effect.annotateCurrentSpan("k", { nested: true })
    }).pipe(Effect.withSpan("held", { parent: remoteParent({ ...CALLER, sampled: false }) }))
    await run(program, sdkSpansLayer, samplerSettings(undefined, undefined))
    const [span] = seen
    expect(span!.traceId).toBe(CALLER.traceId)
    expect(span!.sampled).toBe(false)
    expect(span!.spanId).toMatch(/^[0-9a-f]{16}$/)
    expect(span!.attributes.get("k")).toEqual({ nested: true })
    expect(span!.status._tag).toBe("Ended")
    expect(Context.getOption(span!.context, OtelTracer.OtelTracer)._tag).toBe("None")
  })
})
