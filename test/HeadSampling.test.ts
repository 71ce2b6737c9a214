/**
 * Head sampling as the fast lane decides it (`HeadSampling`): the same settings and the same decisions
 * as the OpenTelemetry SDK's samplers, which the exporter is built with; a new trace it samples by
 * ratio keeps the trace id the decision was made on.
 */
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags } from "@opentelemetry/api"
import {
  AlwaysOnSampler,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler
} from "@opentelemetry/sdk-trace-base"
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { LaneIdGenerator, randomHexId, sampled, samplerSettings, withDrawnTraceId } from "../src/observability/HeadSampling.js"

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

const caller = (isSampled: boolean, traceId = randomBytes(16).toString("hex")) => ({
  traceId,
  spanId: randomBytes(8).toString("hex"),
  sampled: isSampled
})

describe("sampled", () => {
  it("honours the caller's flag under the parent-based samplers, whatever the root sampler says", () => {
    for (const name of ["parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const) {
      const settings = { name, ratio: 0 }
      expect(sampled(settings, caller(true))).toBe(true)
      expect(sampled(settings, caller(false))).toBe(false)
    }
    expect(sampled({ name: "parentbased_always_on", ratio: 1 }, undefined)).toBe(true)
    expect(sampled({ name: "parentbased_always_off", ratio: 1 }, undefined)).toBe(false)
    expect(sampled({ name: "always_off", ratio: 1 }, caller(true))).toBe(false)
    expect(sampled({ name: "always_on", ratio: 1 }, caller(false))).toBe(true)
  })

  it("decides a caller's trace by ratio exactly as the SDK's TraceIdRatioBasedSampler does", () => {
    for (const ratio of [0, 0.1, 0.5, 0.9, 1]) {
      const sdk = new TraceIdRatioBasedSampler(ratio)
      for (let i = 0; i < 400; i++) {
        const parent = caller(i % 2 === 0)
        const expected = sdk.shouldSample(ROOT_CONTEXT, parent.traceId).decision === SamplingDecision.RECORD_AND_SAMPLED
        expect(sampled({ name: "traceidratio", ratio }, parent)).toBe(expected)
      }
    }
  })

  it("samples about the ratio of new traces, and the span made next gets the trace id decided on", () => {
    const settings = { name: "parentbased_traceidratio", ratio: 0.1 } as const
    const sdk = new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) })
    const ids = new LaneIdGenerator()
    let count = 0
    for (let i = 0; i < 20_000; i++) if (withDrawnTraceId(() => sampled(settings, undefined))) count++
    // 2,000 expected; the bounds are more than ten standard deviations (42) wide.
    expect(count).toBeGreaterThan(1_500)
    expect(count).toBeLessThan(2_500)
    for (let i = 0; i < 200; i++) {
      const traceId = withDrawnTraceId(() => sampled(settings, undefined) ? ids.generateTraceId() : undefined)
      if (traceId === undefined) continue
      expect(traceId).toMatch(/^[0-9a-f]{32}$/)
      expect(sdk.shouldSample(ROOT_CONTEXT, traceId, "POST /oauth/token", SpanKind.SERVER, {}, []).decision)
        .toBe(SamplingDecision.RECORD_AND_SAMPLED)
    }
    // Once withdrawn, no drawn id is handed out: ids are random again.
    const a = ids.generateTraceId()
    const b = ids.generateTraceId()
    expect(a).not.toBe(b)
  })

  it("leaves a child of a sampled remote parent to the SDK's parent-based decision", () => {
    const sdk = new ParentBasedSampler({ root: new AlwaysOnSampler() })
    const parent = caller(false)
    const context = trace.setSpanContext(ROOT_CONTEXT, { ...parent, traceFlags: TraceFlags.NONE, isRemote: true })
    expect(sdk.shouldSample(context, parent.traceId, "x", SpanKind.SERVER, {}, []).decision).toBe(SamplingDecision.NOT_RECORD)
    expect(sampled({ name: "parentbased_always_on", ratio: 1 }, parent)).toBe(false)
  })
})

describe("randomHexId", () => {
  it("gives valid, distinct W3C ids", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 2_000; i++) {
      const trace = randomHexId(16)
      const span = randomHexId(8)
      expect(trace).toMatch(/^(?!0+$)[0-9a-f]{32}$/)
      expect(span).toMatch(/^(?!0+$)[0-9a-f]{16}$/)
      seen.add(trace)
    }
    expect(seen.size).toBe(2_000)
  })
})
