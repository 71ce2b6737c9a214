/**
 * Head sampling (`HeadSampling`, applied by `RequestTracer` in front of the OTLP tracer): the SDK's
 * settings and decisions, then the tracer itself exporting to an OTLP sink: only sampled traces
 * arrive, a ratio's decision holds for the trace id exported, a caller's flag is followed, the
 * work inside a request arrives as events of its span, and the upstream call as a span of its own.
 */
import { Effect, Tracer } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accumulate, decide, IdSource, samplerSettings, sampledTraceId, type SamplerSettings } from "../src/observability/HeadSampling.js"
import { UpstreamCall } from "../src/observability/RequestTracer.js"
import * as TracingOtlp from "../src/observability/TracingOtlp.js"
import type { TracingSettings } from "../src/observability/TracingSettings.js"
import { type OtlpSink, startOtlpSink } from "./support/OtlpSink.js"

describe("samplerSettings", () => {
  it("reads OTEL_TRACES_SAMPLER and its argument with the SDK's fallbacks", () => {
    expect(samplerSettings(undefined, undefined)).toEqual({ name: "parentbased_always_on", ratio: 1 })
    expect(samplerSettings("traceidratio", "0.25")).toEqual({ name: "traceidratio", ratio: 0.25 })
    expect(samplerSettings("parentbased_traceidratio", "0")).toEqual({ name: "parentbased_traceidratio", ratio: 0 })
    // Unknown (or unsupported) samplers are the default; a bad ratio is 1.
    expect(samplerSettings("jaeger_remote", "0.5").name).toBe("parentbased_always_on")
    expect(samplerSettings("traceidratio", "1.5").ratio).toBe(1)
    expect(samplerSettings("traceidratio", "-0.1").ratio).toBe(1)
    expect(samplerSettings("traceidratio", "half").ratio).toBe(1)
    expect(samplerSettings("traceidratio", " ").ratio).toBe(1)
  })
})

const caller = (sampled: boolean, traceId = randomBytes(16).toString("hex")) => ({ _tag: "Caller" as const, traceId, sampled })

describe("decide", () => {
  it("follows the caller's flag under the parent-based samplers, whatever the root sampler says", () => {
    for (const name of ["parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const) {
      expect(decide({ name, ratio: 0 }, caller(true))).toBe(true)
      expect(decide({ name, ratio: 1 }, caller(false))).toBe(false)
    }
    expect(decide({ name: "parentbased_always_on", ratio: 1 }, { _tag: "New" })).toBe(true)
    expect(decide({ name: "parentbased_always_off", ratio: 1 }, { _tag: "New" })).toBe(false)
    expect(decide({ name: "always_off", ratio: 1 }, caller(true))).toBe(false)
    expect(decide({ name: "always_on", ratio: 1 }, caller(false))).toBe(true)
  })

  it("decides by ratio on the trace id, as the SDK's TraceIdRatioBasedSampler does", () => {
    // The SDK xors the id's four 32-bit words and compares with floor(ratio * 0xffffffff).
    expect(accumulate("00000001000000020000000400000008")).toBe(15)
    expect(accumulate("ffffffff000000000000000000000000")).toBe(0xffffffff)
    const half: SamplerSettings = { name: "traceidratio", ratio: 0.5 }
    expect(sampledTraceId(half, "7ffffffe000000000000000000000000")).toBe(true)
    expect(sampledTraceId(half, "7fffffff000000000000000000000000")).toBe(false)
    expect(decide(half, caller(false, "7ffffffe000000000000000000000000"))).toBe(true)
    expect(decide(half, caller(true, "7fffffff000000000000000000000000"))).toBe(false)
    expect(decide(half, { _tag: "New" })).toBe("ByTraceId")
    expect(decide({ name: "traceidratio", ratio: 0 }, { _tag: "New" })).toBe(false)
    expect(decide({ name: "parentbased_traceidratio", ratio: 1 }, { _tag: "New" })).toBe(true)
  })
})

describe("IdSource", () => {
  it("gives valid, distinct W3C ids", () => {
    const ids = new IdSource()
    const seen = new Set<string>()
    for (let i = 0; i < 2_000; i++) {
      expect(ids.hex(8)).toMatch(/^(?!0+$)[0-9a-f]{16}$/)
      const trace = ids.hex(16)
      expect(trace).toMatch(/^(?!0+$)[0-9a-f]{32}$/)
      seen.add(trace)
    }
    expect(seen.size).toBe(2_000)
  })
})

let sink: OtlpSink
beforeAll(async () => {
  sink = await startOtlpSink()
})
afterAll(() => sink.close())

const settingsFor = (sampler: SamplerSettings): TracingSettings => ({
  tracesUrl: `${sink.endpoint}/v1/traces`,
  protocol: "http/json",
  serviceName: "sampling-test",
  sampler,
  headers: {},
  compression: "none",
  timeoutMillis: 5_000,
  // Nothing leaves on a schedule: what arrives was flushed when the tracer's layer closed.
  scheduleDelayMillis: 600_000,
  maxBatchSize: 10_000,
  tls: {},
  resourceAttributes: {},
  ignored: []
})

/** Runs `program` with the OTLP tracer for `sampler`, closes it (flushing), and gives the spans that arrived. */
const exported = async (sampler: SamplerSettings, program: Effect.Effect<unknown>) => {
  const before = sink.spans().length
  await Effect.runPromise(Effect.provide(program, TracingOtlp.layer(settingsFor(sampler))))
  return sink.spans().slice(before)
}

describe("the tracer, exporting to an OTLP sink", () => {
  it("a ratio: about that share of new traces arrives, each on a trace id the ratio samples, children with it", async () => {
    const sampler: SamplerSettings = { name: "traceidratio", ratio: 0.25 }
    const spans = await exported(
      sampler,
      Effect.forEach(
        Array.from({ length: 400 }, (_, i) => i),
        (i) => Effect.withSpan(Effect.withSpan(Effect.void, `child-${i}`), `root-${i}`),
        { discard: true }
      )
    )
    const roots = spans.filter((s) => s.name.startsWith("root-"))
    // 100 expected; the bounds are over five standard deviations (8.7) wide.
    expect(roots.length).toBeGreaterThan(55)
    expect(roots.length).toBeLessThan(145)
    for (const root of roots) {
      expect(sampledTraceId(sampler, root.traceId)).toBe(true)
      const child = spans.find((s) => s.name === root.name.replace("root", "child"))
      expect(child).toMatchObject({ traceId: root.traceId, parentSpanId: root.spanId })
    }
    expect(spans).toHaveLength(roots.length * 2)
    expect(spans[0]!.resource["service.name"]).toBe("sampling-test")
  })

  it("a caller's flag decides under parentbased_always_on; what is not sampled still has ids to propagate", async () => {
    const traceId = randomBytes(16).toString("hex")
    const spanId = randomBytes(8).toString("hex")
    let unsampled: Tracer.Span | undefined
    const spans = await exported(
      { name: "parentbased_always_on", ratio: 1 },
      Effect.gen(function*() {
        yield* Effect.withSpan(Effect.void, "followed", { parent: Tracer.externalSpan({ traceId, spanId, sampled: true }) })
        yield* Effect.withSpan(
          Effect.flatMap(Effect.currentSpan, (span) => Effect.sync(() => (unsampled = span))),
          "dropped",
          { parent: Tracer.externalSpan({ traceId: randomBytes(16).toString("hex"), spanId, sampled: false }) }
        ).pipe(Effect.orDie)
      })
    )
    expect(spans.map((s) => s.name)).toEqual(["followed"])
    expect(spans[0]).toMatchObject({ traceId, parentSpanId: spanId })
    expect(unsampled!.sampled).toBe(false)
    expect(unsampled!.spanId).toMatch(/^[0-9a-f]{16}$/)
  })

  it("inside a request: the work's spans are events of the request's span, the upstream call a span of its own", async () => {
    const spans = await exported(
      { name: "always_on", ratio: 1 },
      Effect.gen(function*() {
        const storage = Effect.withSpan(
          Effect.withSpan(Effect.void, "sql.execute", { attributes: { "db.query.text": "SELECT 1" } }),
          "CredentialRepo.find"
        )
        // A client span not marked as the upstream call (a database's, say) is work like any other.
        const unmarked = Effect.withSpan(Effect.void, "pg.query", { kind: "client" })
        yield* Effect.withSpan(
          Effect.all([
            storage,
            Effect.annotateCurrentSpan("service_auth.profile", "acme"),
            Effect.withSpan(unmarked, "ServiceHandlers.call"),
            Effect.withSpan(Effect.annotateCurrentSpan("http.response.status_code", 200), "ServiceHandlers.proxy", {
              kind: "client",
              context: UpstreamCall.context(true)
            })
          ]),
          "POST /request",
          { kind: "server" }
        )
      })
    )
    const request = spans.find((s) => s.name === "POST /request")!
    expect(spans.map((s) => s.name).sort()).toEqual(["POST /request", "ServiceHandlers.proxy"])
    expect(request.attributes).toEqual({ "service_auth.profile": "acme" })
    expect(request.events.map((e) => e.name)).toEqual(["sql.execute", "CredentialRepo.find", "pg.query", "ServiceHandlers.call"])
    expect(request.events[0]!.attributes).toMatchObject({ "db.query.text": "SELECT 1", duration_ms: expect.any(Number) })
    const upstream = spans.find((s) => s.name === "ServiceHandlers.proxy")!
    expect(upstream).toMatchObject({ kind: 3, traceId: request.traceId, parentSpanId: request.spanId })
    expect(upstream.attributes).toEqual({ "http.response.status_code": 200 })
  })
})
