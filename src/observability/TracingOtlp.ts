/**
 * The OTLP/HTTP trace exporter behind `Tracing.layer`, imported only when an endpoint is configured
 * (its modules are a separate chunk of the bundle): `@effect/opentelemetry`'s `OtlpTracer`, which
 * batches Effect's spans and POSTs them as OTLP/JSON or OTLP/protobuf, behind `RequestTracer`
 * (head sampling, one span per request).
 *
 * What the OpenTelemetry variables ask of the exporter is done by the HTTP client it posts with
 * (`exportClient`): the headers, gzip, the timeout, the certificate files (an agent of its own). A
 * request never waits for the collector; when the collector fails, the tracer drops spans for a
 * minute, and the log says so once, at warning level.
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { HttpClient, HttpClientError, HttpClientRequest } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { gzipSync } from "node:zlib"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import { makeRequestTracer } from "./RequestTracer.js"
import type { TracingSettings } from "./TracingSettings.js"

/** How long the shutdown waits for the last spans to reach the collector. */
const FLUSH_TIMEOUT = Duration.seconds(3)

const serviceVersion = (): string | undefined => {
  try {
    return JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")).version
  } catch {
    return undefined
  }
}

/**
 * The exporter's HTTP client: the configured headers on every export, the body gzipped when asked,
 * each attempt bounded by the timeout, and a warning (once: a dead collector fails every batch)
 * when an export fails.
 */
const exportClient = (settings: TracingSettings) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const host = new URL(settings.tracesUrl).host
    let warned = false
    const warnOnce = (reason: string) =>
      Effect.suspend(() => {
        if (warned) return Effect.void
        warned = true
        return Effect.logWarning(`traces: cannot export spans to ${host} (${reason}); they are dropped until it answers`)
      })
    return client.pipe(
      HttpClient.mapRequest((request) => {
        const withHeaders = HttpClientRequest.setHeaders(request, settings.headers)
        if (settings.compression !== "gzip" || withHeaders.body._tag !== "Uint8Array") return withHeaders
        return HttpClientRequest.setHeader(
          HttpClientRequest.bodyUint8Array(withHeaders, gzipSync(withHeaders.body.body), withHeaders.body.contentType),
          "content-encoding",
          "gzip"
        )
      }),
      HttpClient.transform((response, request) =>
        response.pipe(
          Effect.timeoutFail({
            duration: Duration.millis(settings.timeoutMillis),
            onTimeout: () =>
              new HttpClientError.RequestError({
                request,
                reason: "Transport",
                description: `no answer within ${settings.timeoutMillis} ms`
              })
          }),
          Effect.tap((answered) => answered.status >= 300 ? warnOnce(`status ${answered.status}`) : Effect.void),
          Effect.tapError((error) => warnOnce(error.description ?? error.reason))
        )
      )
    )
  })

/** The client's node:http agent: the certificate files' when any is set. */
const agentLayer = (settings: TracingSettings) =>
  Object.keys(settings.tls).length === 0 ? NodeHttpClient.agentLayer : NodeHttpClient.makeAgentLayer(settings.tls)

/** Effect's tracer, exporting to the collector `settings` name; the scope's close flushes it. */
const makeTracer = (settings: TracingSettings) =>
  Effect.gen(function*() {
    const version = serviceVersion()
    // Built in the tracer's scope: the agent is closed after the last flush.
    const http = yield* Layer.build(NodeHttpClient.layerWithoutAgent.pipe(Layer.provide(agentLayer(settings))))
    const client = yield* Effect.provide(exportClient(settings), http)
    const inner = yield* OtlpTracer.make({
      url: settings.tracesUrl,
      resource: {
        serviceName: settings.serviceName,
        ...(version === undefined ? {} : { serviceVersion: version }),
        attributes: settings.resourceAttributes
      },
      exportInterval: Duration.millis(settings.scheduleDelayMillis),
      maxBatchSize: settings.maxBatchSize,
      shutdownTimeout: FLUSH_TIMEOUT
    }).pipe(
      Effect.provideService(HttpClient.HttpClient, client),
      Effect.provide(settings.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson)
    )
    return makeRequestTracer(inner, settings.sampler)
  })

/**
 * The tracer for `settings`, installed as Effect's. Its exporter lives in a scope of its own, closed
 * last by a fiber of its own: the server's fiber closes its layers while interrupted, where the
 * exporter's final flush (interruptible, with its deadline) would end before it began.
 */
export const layer = (settings: TracingSettings): Layer.Layer<never> =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      if (settings.ignored.length > 0) {
        yield* Effect.logWarning(
          `traces: ${settings.ignored.join(", ")} ${settings.ignored.length === 1 ? "is" : "are"} not supported and ignored`
        )
      }
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer((exit) =>
        Effect.flatMap(Effect.forkDaemon(Scope.close(scope, Exit.isSuccess(exit) ? Exit.void : exit)), Fiber.await)
      )
      const tracer = yield* Scope.extend(makeTracer(settings), scope)
      return Layer.setTracer(tracer)
    })
  )
