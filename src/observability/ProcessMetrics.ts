/**
 * The process's own figures for `GET /metrics`, read when scraped: memory (resident set, V8 heap,
 * external), CPU time, start time, and the event loop (delay percentiles and utilisation since the
 * previous scrape: what "is this instance saturated" needs). Names follow the usual Node exporter's,
 * so existing dashboards read them. The delay monitor samples every 10 ms while the server runs.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from "node:perf_hooks"

const gauge = (name: string, description: string) => Metric.gauge(name, { description })

const residentMemory = gauge("process_resident_memory_bytes", "Resident memory size in bytes.")
const heapUsed = gauge("nodejs_heap_size_used_bytes", "V8 heap in use, in bytes.")
const heapTotal = gauge("nodejs_heap_size_total_bytes", "V8 heap reserved, in bytes.")
const externalMemory = gauge("nodejs_external_memory_bytes", "Memory of C++ objects bound to JavaScript objects, in bytes.")
const startTime = gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.")
const cpuUser = Metric.counter("process_cpu_user_seconds_total", { description: "User CPU time spent, in seconds." })
const cpuSystem = Metric.counter("process_cpu_system_seconds_total", { description: "System CPU time spent, in seconds." })
const lagMean = gauge("nodejs_eventloop_lag_mean_seconds", "Mean event loop delay since the previous scrape, in seconds.")
const lagP50 = gauge("nodejs_eventloop_lag_p50_seconds", "Median event loop delay since the previous scrape, in seconds.")
const lagP99 = gauge("nodejs_eventloop_lag_p99_seconds", "99th percentile event loop delay since the previous scrape, in seconds.")
const lagMax = gauge("nodejs_eventloop_lag_max_seconds", "Longest event loop delay since the previous scrape, in seconds.")
const utilization = gauge(
  "nodejs_eventloop_utilization_ratio",
  "Share of the time since the previous scrape the event loop was busy (0 to 1)."
)

/**
 * Brings a counter of the process's CPU time up to `totalSeconds`. The counter itself holds what was
 * reported (Effect's metrics are the process's, like the CPU time), so no layer keeps a copy that a
 * second server in the process would count again.
 */
const countUpTo = (counter: typeof cpuUser, totalSeconds: number) => counter.unsafeUpdate(totalSeconds - counter.unsafeValue([]).count, [])

export class ProcessMetrics extends Context.Tag("service-auth/ProcessMetrics")<ProcessMetrics, {
  /** Updates the gauges and counters above to this moment. */
  readonly sample: Effect.Effect<void>
}>() {
  static readonly layer = Layer.scoped(
    ProcessMetrics,
    Effect.gen(function*() {
      const delay = monitorEventLoopDelay({ resolution: 10 })
      yield* Effect.acquireRelease(Effect.sync(() => delay.enable()), () => Effect.sync(() => delay.disable()))
      let previousUtilization: EventLoopUtilization = performance.eventLoopUtilization()
      startTime.unsafeUpdate(Math.round((Date.now() - performance.now()) / 1000), [])
      const seconds = (nanoseconds: number) => (Number.isFinite(nanoseconds) ? nanoseconds / 1e9 : 0)
      return ProcessMetrics.of({
        sample: Effect.sync(() => {
          const memory = process.memoryUsage()
          residentMemory.unsafeUpdate(memory.rss, [])
          heapUsed.unsafeUpdate(memory.heapUsed, [])
          heapTotal.unsafeUpdate(memory.heapTotal, [])
          externalMemory.unsafeUpdate(memory.external, [])
          const cpu = process.cpuUsage()
          countUpTo(cpuUser, cpu.user / 1e6)
          countUpTo(cpuSystem, cpu.system / 1e6)
          // No sample yet (a scrape right after start) reads as zero delay, not as NaN.
          const sampled = delay.count > 0
          lagMean.unsafeUpdate(sampled ? seconds(delay.mean) : 0, [])
          lagP50.unsafeUpdate(sampled ? seconds(delay.percentile(50)) : 0, [])
          lagP99.unsafeUpdate(sampled ? seconds(delay.percentile(99)) : 0, [])
          lagMax.unsafeUpdate(sampled ? seconds(delay.max) : 0, [])
          delay.reset()
          const now = performance.eventLoopUtilization()
          utilization.unsafeUpdate(performance.eventLoopUtilization(now, previousUtilization).utilization, [])
          previousUtilization = now
        })
      })
    })
  )
}
