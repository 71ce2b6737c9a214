/**
 * Traces over OTLP/HTTP, configured by the standard OpenTelemetry variables. When no OTLP endpoint
 * is set, tracing is off exactly as before: Effect's tracer is disabled (spans are not even built)
 * and no OpenTelemetry module is loaded. When one is set, `TracingOtlp` (imported on demand, so its
 * modules are parsed only then) exports every span in batches, and the finalizer flushes them on
 * shutdown.
 */
import { Config, ConfigError, Effect, FiberRef, Layer, Option } from "effect"
import { type SamplerSettings, samplerSettings } from "./http/LaneSampler.js"

export interface TracingSettings {
  /** Where spans are POSTed: the signal-specific endpoint as given, or `<endpoint>/v1/traces`. */
  readonly tracesUrl: string
  readonly protocol: "http/json" | "http/protobuf"
  readonly serviceName: string
  /** OTEL_TRACES_SAMPLER and its argument: the one head-sampling decision the fast lane and the exporter share. */
  readonly sampler: SamplerSettings
}

/** JSON rather than the specification's protobuf default: every collector reads it, and so do hand-written receivers. */
export const DEFAULT_PROTOCOL = "http/json"

const setting = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

const invalid = (name: string, message: string) => ConfigError.InvalidData([name], `${name} ${message}`)

/** An http(s) URL, normalised as the OpenTelemetry exporters do; never echoed, it may carry credentials. */
const httpUrl = (name: string, value: string): Effect.Effect<URL, ConfigError.ConfigError> => {
  try {
    const url = new URL(value.trim())
    if (url.protocol === "http:" || url.protocol === "https:") return Effect.succeed(url)
  } catch {
    // reported below
  }
  return Effect.fail(invalid(name, "must be an http:// or https:// URL"))
}

/**
 * None unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set (and
 * neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says otherwise). The rest is read only then, so a leftover OTEL_* variable cannot
 * stop a server that does not trace.
 */
export const settingsFromEnv: Effect.Effect<Option.Option<TracingSettings>, ConfigError.ConfigError> = Effect.gen(
  function*() {
    const specific = yield* setting("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    const general = yield* setting("OTEL_EXPORTER_OTLP_ENDPOINT")
    const disabled = yield* setting("OTEL_SDK_DISABLED")
    const exporter = yield* setting("OTEL_TRACES_EXPORTER")
    if (Option.isNone(specific) && Option.isNone(general)) return Option.none()
    if (Option.exists(disabled, (value) => value.trim().toLowerCase() === "true")) return Option.none()
    if (Option.exists(exporter, (value) => value.trim().toLowerCase() === "none")) return Option.none()

    // The OpenTelemetry specification: the signal's own endpoint is used as given, the general one
    // gets `v1/traces` appended to its path.
    const tracesUrl = Option.isSome(specific)
      ? (yield* httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", specific.value)).toString()
      : yield* Effect.map(httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", Option.getOrThrow(general)), (base) => {
        base.pathname = `${base.pathname.replace(/\/*$/, "")}/v1/traces`
        return base.toString()
      })

    const specificProtocol = yield* setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    const generalProtocol = yield* setting("OTEL_EXPORTER_OTLP_PROTOCOL")
    const protocolName = Option.isSome(specificProtocol) ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL"
    const protocol = Option.getOrElse(Option.orElse(specificProtocol, () => generalProtocol), () => DEFAULT_PROTOCOL)
      .trim()
      .toLowerCase()
    if (protocol !== "http/json" && protocol !== "http/protobuf") {
      return yield* Effect.fail(invalid(protocolName, "must be http/json or http/protobuf (grpc is not supported)"))
    }
    const serviceName = Option.getOrElse(yield* setting("OTEL_SERVICE_NAME"), () => "service-auth")
    const sampler = samplerSettings(
      Option.getOrUndefined(yield* setting("OTEL_TRACES_SAMPLER")),
      Option.getOrUndefined(yield* setting("OTEL_TRACES_SAMPLER_ARG"))
    )
    return Option.some({ tracesUrl, protocol, serviceName, sampler })
  }
)

/**
 * The tracer for `settings`: none (Effect's tracer off) when tracing is not configured, otherwise
 * the OTLP exporter, loaded now. Provide it around the whole server, so that it is closed, and its
 * spans flushed, after the server has drained.
 */
export const layer = (settings: Option.Option<TracingSettings>): Layer.Layer<never> =>
  Option.match(settings, {
    onNone: () => Layer.empty,
    onSome: (settings) =>
      Layer.unwrapEffect(Effect.map(Effect.promise(() => import("./TracingOtlp.js")), (otlp) => otlp.layer(settings)))
  })

/** Spans are built only when they are exported: without a tracer every `withSpan` costs for nothing. */
export const disabledUnless = (settings: Option.Option<TracingSettings>) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Option.isSome(settings) ? effect : Effect.withTracerEnabled(effect, false)

/**
 * Whether spans are built where this runs. Layers read it when they are built, and install their
 * span wrappers only then: a server that does not trace does not even pay for a no-op span.
 */
export const tracerEnabled: Effect.Effect<boolean> = FiberRef.get(FiberRef.currentTracerEnabled)
