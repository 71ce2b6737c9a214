/**
 * The process's CPU counters count up to the process's own totals, however many servers (each with
 * its `ProcessMetrics` layer) one process builds, drops and builds again: none counts it twice.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Metric, MetricState } from "effect"
import { ProcessMetrics } from "../src/observability/ProcessMetrics.js"

const cpuUserCounted = Effect.map(Metric.snapshot, (pairs) => {
  const pair = pairs.find((p) => p.metricKey.name === "process_cpu_user_seconds_total")
  return pair !== undefined && MetricState.isCounterState(pair.metricState) ? Number(pair.metricState.count) : 0
})

it.effect("two servers' process metrics in one process count its CPU time once", () =>
  Effect.gen(function*() {
    const sample = Effect.flatMap(ProcessMetrics, (metrics) => metrics.sample)
    yield* Effect.scoped(Effect.provide(sample, ProcessMetrics.layer))
    // Some CPU time between the two servers.
    let spin = 0
    for (let i = 0; i < 1_000_000; i++) spin += i
    expect(spin).toBeGreaterThan(0)
    yield* Effect.scoped(Effect.provide(sample, ProcessMetrics.layer))
    yield* Effect.scoped(Effect.provide(sample, ProcessMetrics.layer))
    const counted = yield* cpuUserCounted
    expect(counted).toBeGreaterThan(0)
    expect(counted).toBeLessThanOrEqual(process.cpuUsage().user / 1e6 + 1e-6)
  }))
