/**
 * The OTLP/HTTP trace exporter behind `Tracing.layer`, imported only when an endpoint is configured
 * (its modules are a separate chunk of the bundle, and the OpenTelemetry packages stay outside it).
 *
 * Spans go through a batch processor: a request never waits for the collector, and when the
 * collector is unreachable the batches are dropped (the queue is bounded) and one warning is logged.
 * The exporter reads the other standard variables itself: OTEL_EXPORTER_OTLP_HEADERS (and
 * `_TRACES_HEADERS`), `_TIMEOUT`, `_COMPRESSION`, the certificate files; the batch processor reads
 * OTEL_BSP_*; the resource takes OTEL_RESOURCE_ATTRIBUTES. Effect's spans are recorded as the SDK
 * records spans by `SdkSpans`, with the SDK provider's span limits (OTEL_SPAN_*, OTEL_ATTRIBUTE_*).
 */
import * as Resource from "@effect/opentelemetry/Resource"
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
  type SpanLimits,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Runtime } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions"
import type { TracingSettings } from "./TracingSettings.js"
import { type InstrumentationScope, makeTracer } from "./SdkSpans.js"
import type { SamplerSettings } from "./HeadSampling.js"

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

/**
 * Effect's tracer for spans that go to `processor`: it records them as the SDK would (`SdkSpans`),
 * with the span limits of an SDK provider (read from the OTEL_SPAN_* and OTEL_ATTRIBUTE_* variables)
 * and the scope of the tracer `@effect/opentelemetry` took from it (named and versioned as the
 * service). The provider owns the processor: its finalizer, run last, flushes what is queued, for
 * at most FLUSH_TIMEOUT_MS. It makes no span, so it has no sampler or id generator of ours: the
 * tracer samples by `HeadSampling` and draws its own ids. Tests give it an in-memory processor.
 */
export const layerSpans = (sampler: SamplerSettings, processor: SpanProcessor) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const resource = yield* Resource.Resource
      const provider = yield* Effect.acquireRelease(
        Effect.sync(() => new BasicTracerProvider({ resource, spanProcessors: [processor] })),
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
      const version = resource.attributes[ATTR_SERVICE_VERSION]
      const tracer = provider.getTracer(
        String(resource.attributes[ATTR_SERVICE_NAME]),
        version === undefined ? undefined : String(version)
      )
      return Layer.setTracer(makeTracer({
        processor,
        resource,
        scope: (tracer as unknown as { readonly instrumentationScope: InstrumentationScope }).instrumentationScope,
        limits: spanLimitsOf(tracer),
        sampler
      }))
    })
  )

/** Spans exported over OTLP/HTTP as `settings` say, in batches. */
const layerExported = (settings: TracingSettings) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
      const exporter = warningOnce(yield* Effect.promise(() => makeExporter(settings)), new URL(settings.tracesUrl).host, warn)
      return layerSpans(settings.sampler, new BatchSpanProcessor(exporter, batchDelay()))
    })
  )

/**
 * The span limits the provider gave its tracer. The SDK keeps them in a field of its own; a version
 * that moved it stops the start here rather than exporting spans without limits.
 */
const spanLimitsOf = (tracer: object): SpanLimits => {
  const limits = (tracer as { readonly _spanLimits?: SpanLimits })._spanLimits
  if (typeof limits !== "object" || limits === null) throw new Error("traces: the OpenTelemetry SDK's tracer has no span limits")
  return limits
}

export const layer = (settings: TracingSettings): Layer.Layer<never> => {
  const version = serviceVersion()
  const resource = Resource.layerFromEnv(
    Resource.configToAttributes({
      serviceName: settings.serviceName,
      ...(version === undefined ? {} : { serviceVersion: version })
    })
  )
  return layerExported(settings).pipe(Layer.provide(resource))
}
