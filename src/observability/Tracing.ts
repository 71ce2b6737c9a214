/**
 * Traces over OTLP/HTTP, configured by the standard OpenTelemetry variables (`TracingSettings`). When no OTLP endpoint
 * is set, tracing is off exactly as before: Effect's tracer is disabled (spans are not even built)
 * and the exporter's modules are not loaded. When one is set, `TracingOtlp` (imported on demand, so
 * its modules are parsed only then) exports the sampled spans in batches, a request as one span
 * (`RequestTracer`), and the finalizer flushes them on shutdown.
 */
import { Effect, FiberRef, Layer, Option } from "effect"
import type { TracingSettings } from "./TracingSettings.js"

/**
 * The tracer for `settings`: none (Effect's tracer off) when tracing is not configured, otherwise
 * the OTLP exporter, loaded now. Provide it around the whole server, so that it is closed, and its
 * spans flushed, after the server has drained.
 */
export const layer = (settings: Option.Option<TracingSettings>): Layer.Layer<never> =>
  Option.match(settings, {
    onNone: () => Layer.empty,
    onSome: (settings) => Layer.unwrapEffect(Effect.map(Effect.promise(() => import("./TracingOtlp.js")), (otlp) => otlp.layer(settings)))
  })

/** Spans are built only when they are exported: without a tracer every `withSpan` costs for nothing. */
export const disabledUnless =
  (settings: Option.Option<TracingSettings>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Option.isSome(settings) ? effect : Effect.withTracerEnabled(effect, false)

/**
 * Whether spans are built where this runs. Layers read it when they are built, and install their
 * span wrappers only then: a server that does not trace does not even pay for a no-op span.
 */
export const tracerEnabled: Effect.Effect<boolean> = FiberRef.get(FiberRef.currentTracerEnabled)
