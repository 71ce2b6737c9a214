/**
 * The tracing settings as the OpenTelemetry variables give them (`settingsFromEnv`): the signal's
 * own variables over the general ones, percent-decoded headers and resource attributes, the
 * specification's order for the service name, fallbacks for numbers that are not, and the names of
 * the variables the exporter cannot honour.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import { keyValues, settingsFromEnv } from "../src/observability/TracingSettings.js"

const settingsOf = (env: Record<string, string>) =>
  Effect.withConfigProvider(settingsFromEnv, ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("settingsFromEnv", () => {
  it.effect("reads the exporter's variables, the signal's own first", () =>
    Effect.gen(function*() {
      const settings = Option.getOrThrow(
        yield* settingsOf({
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/base/",
          OTEL_EXPORTER_OTLP_HEADERS: "api-key=general,x-team=core",
          OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=traces%20key",
          OTEL_EXPORTER_OTLP_COMPRESSION: "GZIP",
          OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
          OTEL_BSP_SCHEDULE_DELAY: "250",
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "not a number",
          OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=from-attributes",
          OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT: "64"
        })
      )
      expect(settings).toMatchObject({
        tracesUrl: "http://collector:4318/base/v1/traces",
        protocol: "http/json",
        serviceName: "from-attributes",
        headers: { "api-key": "traces key", "x-team": "core" },
        compression: "gzip",
        timeoutMillis: 2500,
        scheduleDelayMillis: 250,
        maxBatchSize: 512,
        tls: {},
        resourceAttributes: { "deployment.environment": "prod", "service.name": "from-attributes" },
        ignored: ["OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"]
      })
    }))

  it.effect("OTEL_SERVICE_NAME wins; defaults when nothing else is set", () =>
    Effect.gen(function*() {
      const named = Option.getOrThrow(
        yield* settingsOf({
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector/v1/traces",
          OTEL_SERVICE_NAME: "gateway",
          OTEL_RESOURCE_ATTRIBUTES: "service.name=other"
        })
      )
      expect(named.serviceName).toBe("gateway")
      expect(named.tracesUrl).toBe("https://collector/v1/traces")
      const plain = Option.getOrThrow(yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }))
      expect(plain).toMatchObject({
        serviceName: "service-auth",
        headers: {},
        compression: "none",
        timeoutMillis: 10_000,
        scheduleDelayMillis: 1_000,
        maxBatchSize: 512,
        ignored: []
      })
    }))

  it.effect("refuses a compression it cannot apply, naming the variable", () =>
    Effect.gen(function*() {
      const failure = yield* Effect.flip(settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: "zstd"
      }))
      expect(String(failure)).toContain("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION must be gzip or none")
    }))
})

describe("keyValues", () => {
  it("decodes pairs, keeps '=' in values, and skips what is malformed", () => {
    expect(keyValues("a=1, b = two ,c=x=y,broken,=nokey,d=%E2%82%AC,e=%ZZ")).toEqual({ a: "1", b: "two", c: "x=y", d: "€" })
  })
})
