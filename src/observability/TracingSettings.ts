/**
 * The tracing settings, read from the standard OpenTelemetry variables. Apart from the tracer
 * (`Tracing`) and its exporter (`TracingOtlp`), which both read them: the exporter's module is
 * imported on demand, and neither needs the other to know what the settings are.
 */
import { Config, ConfigError, Effect, Option } from "effect"

export interface TracingSettings {
  /** Where spans are POSTed: the signal-specific endpoint as given, or `<endpoint>/v1/traces`. */
  readonly tracesUrl: string
  readonly protocol: "http/json" | "http/protobuf"
  readonly serviceName: string
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
    return Option.some({ tracesUrl, protocol, serviceName })
  }
)
