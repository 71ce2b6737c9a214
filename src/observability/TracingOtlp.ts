/**
 * The OTLP/HTTP trace exporter behind `Tracing.layer`, imported only when an endpoint is configured
 * (its modules are a separate chunk of the bundle, and the OpenTelemetry packages stay outside it).
 *
 * Spans go through a batch processor: a request never waits for the collector, and when the
 * collector is unreachable the batches are dropped (the queue is bounded) and one warning is logged.
 * The exporter reads the other standard variables itself: OTEL_EXPORTER_OTLP_HEADERS (and
 * `_TRACES_HEADERS`), `_TIMEOUT`, `_COMPRESSION`, the certificate files; the batch processor reads
 * OTEL_BSP_*; the resource takes OTEL_RESOURCE_ATTRIBUTES.
 */
import * as Resource from "@effect/opentelemetry/Resource"
import * as Tracer from "@effect/opentelemetry/Tracer"
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Runtime } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import type { TracingSettings } from "./TracingSettings.js"

/** `ExportResultCode.SUCCESS` of @opentelemetry/core. */
const EXPORT_SUCCEEDED = 0

/**
 * How often a batch leaves, unless OTEL_BSP_SCHEDULE_DELAY says: a second rather than the
 * OpenTelemetry default of five, so that a trace is there to look at as soon as it is asked for.
 */
const batchDelay = (): { readonly scheduledDelayMillis?: number } =>
  (process.env.OTEL_BSP_SCHEDULE_DELAY ?? "").trim() === "" ? { scheduledDelayMillis: 1_000 } : {}

/** How long the shutdown waits for the last spans to reach the collector. */
const FLUSH_TIMEOUT_MS = 3_000

const makeExporter = async (settings: TracingSettings): Promise<SpanExporter> => {
  const { OTLPTraceExporter } = settings.protocol === "http/protobuf"
    ? await import("@opentelemetry/exporter-trace-otlp-proto")
    : await import("@opentelemetry/exporter-trace-otlp-http")
  return new OTLPTraceExporter({ url: settings.tracesUrl })
}

/** The exporter, saying once (a dead collector fails every batch) that spans are being dropped. */
const warningOnce = (exporter: SpanExporter, host: string, warn: (message: string) => void): SpanExporter => {
  let warned = false
  return {
    export: (spans, done) =>
      exporter.export(spans, (result) => {
        if (result.code !== EXPORT_SUCCEEDED && !warned) {
          warned = true
          warn(`traces: cannot export spans to ${host} (${result.error?.message ?? "failed"}); they are dropped until it answers`)
        }
        done(result)
      }),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve()
  }
}

const serviceVersion = (): string | undefined => {
  try {
    return JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")).version
  } catch {
    return undefined
  }
}

/** The provider is shut down last: its finalizer flushes what is queued, for at most FLUSH_TIMEOUT_MS. */
const layerProvider = (settings: TracingSettings) =>
  Layer.scoped(
    Tracer.OtelTracerProvider,
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
      const exporter = warningOnce(yield* Effect.promise(() => makeExporter(settings)), new URL(settings.tracesUrl).host, warn)
      const resource = yield* Resource.Resource
      return yield* Effect.acquireRelease(
        Effect.sync(() => new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter, batchDelay())] })),
        // The deadline is the promise's own: this runs while the interrupted server shuts down, where
        // an interruptible region (which Effect's timeouts need) would end at once, before flushing.
        (provider) =>
          Effect.promise(() =>
            Promise.race([
              provider.forceFlush().then(() => provider.shutdown()).catch(() => {}),
              new Promise<void>((resolve) => setTimeout(resolve, FLUSH_TIMEOUT_MS).unref())
            ])
          )
      )
    })
  )

export const layer = (settings: TracingSettings): Layer.Layer<never> => {
  const version = serviceVersion()
  const resource = Resource.layerFromEnv(
    Resource.configToAttributes({
      serviceName: settings.serviceName,
      ...(version === undefined ? {} : { serviceVersion: version })
    })
  )
  return Tracer.layer.pipe(Layer.provide(layerProvider(settings)), Layer.provide(resource), Layer.discard)
}
