/**
 * The tracing settings, read from the standard OpenTelemetry variables. Apart from the tracer
 * (`Tracing`) and its exporter (`TracingOtlp`), which both read them: the exporter's module is
 * imported on demand, and neither needs the other to know what the settings are. Every variable the
 * exporter honours is read here, once; those it cannot honour are named (`ignored`), for the one
 * line the start prints about them.
 */
import { Config, ConfigError, Effect, Option } from "effect"
import { readFileSync } from "node:fs"
import { type SamplerSettings, samplerSettings } from "./HeadSampling.js"

export interface TracingSettings {
  /** Where spans are POSTed: the signal-specific endpoint as given, or `<endpoint>/v1/traces`. */
  readonly tracesUrl: string
  readonly protocol: "http/json" | "http/protobuf"
  readonly serviceName: string
  /** OTEL_TRACES_SAMPLER and its argument: the one head-sampling decision the fast lane and the exporter share. */
  readonly sampler: SamplerSettings
  /** OTEL_EXPORTER_OTLP_HEADERS, then OTEL_EXPORTER_OTLP_TRACES_HEADERS over it. Never logged. */
  readonly headers: Readonly<Record<string, string>>
  readonly compression: "gzip" | "none"
  /** How long one export may take (OTEL_EXPORTER_OTLP_TIMEOUT), in milliseconds. */
  readonly timeoutMillis: number
  /** How often a batch leaves (OTEL_BSP_SCHEDULE_DELAY), in milliseconds. */
  readonly scheduleDelayMillis: number
  /** The most spans in one export (OTEL_BSP_MAX_EXPORT_BATCH_SIZE); a full batch leaves at once. */
  readonly maxBatchSize: number
  /** The certificate files of the OTEL_EXPORTER_OTLP_*CERTIFICATE and `_CLIENT_KEY` variables, read. */
  readonly tls: { readonly ca?: string; readonly cert?: string; readonly key?: string }
  /** OTEL_RESOURCE_ATTRIBUTES, decoded. */
  readonly resourceAttributes: Readonly<Record<string, string>>
  /** The OpenTelemetry variables set that this exporter does not honour. */
  readonly ignored: ReadonlyArray<string>
}

/**
 * Variables of the OpenTelemetry SDK that this exporter has no counterpart for: span limits (the
 * spans here carry a handful of attributes and events of their own making), the batch queue's bound
 * and export deadline (a batch leaves when it is full, and an export is bounded by the timeout).
 */
const IGNORED = [
  "OTEL_ATTRIBUTE_COUNT_LIMIT",
  "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
  "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
  "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
  "OTEL_SPAN_EVENT_COUNT_LIMIT",
  "OTEL_SPAN_LINK_COUNT_LIMIT",
  "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
  "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
  "OTEL_BSP_MAX_QUEUE_SIZE",
  "OTEL_BSP_EXPORT_TIMEOUT"
]

/** How often a batch leaves unless OTEL_BSP_SCHEDULE_DELAY says: a second, so a trace is soon there to look at. */
const SCHEDULE_DELAY_MS = 1_000
const MAX_BATCH_SIZE = 512
const TIMEOUT_MS = 10_000

/** JSON rather than the specification's protobuf default: every collector reads it, and so do hand-written receivers. */
export const DEFAULT_PROTOCOL = "http/json"

const setting = (name: string) => Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

const invalid = (name: string, message: string) => ConfigError.InvalidData([name], `${name} ${message}`)

/** The signal's own variable, else the general one (`OTEL_EXPORTER_OTLP_TRACES_X`, `OTEL_EXPORTER_OTLP_X`). */
const exporterSetting = (suffix: string) =>
  Effect.gen(function*() {
    const specific = yield* setting(`OTEL_EXPORTER_OTLP_TRACES_${suffix}`)
    if (Option.isSome(specific)) return Option.some({ name: `OTEL_EXPORTER_OTLP_TRACES_${suffix}`, value: specific.value.trim() })
    return Option.map(
      yield* setting(`OTEL_EXPORTER_OTLP_${suffix}`),
      (value) => ({ name: `OTEL_EXPORTER_OTLP_${suffix}`, value: value.trim() })
    )
  })

/** A positive whole number, or the default (as the SDK reads its numeric variables). */
const positive = (value: Option.Option<string>, fallback: number) =>
  Option.getOrElse(
    Option.filter(Option.map(value, (text) => Number(text.trim())), (n) => Number.isInteger(n) && n > 0),
    () => fallback
  )

/**
 * `key=value` pairs separated by commas, percent-decoded (W3C Baggage's form, which the
 * specification gives OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES); a malformed pair is
 * skipped, as the SDK skips it.
 */
export const keyValues = (text: string): Record<string, string> => {
  const pairs: Record<string, string> = {}
  for (const item of text.split(",")) {
    const at = item.indexOf("=")
    if (at <= 0) continue
    try {
      const key = decodeURIComponent(item.slice(0, at).trim())
      const value = decodeURIComponent(item.slice(at + 1).trim())
      if (key !== "") pairs[key] = value
    } catch {
      // a malformed percent-encoding: skipped
    }
  }
  return pairs
}

const fileOf = (found: Option.Option<{ readonly name: string; readonly value: string }>) =>
  Option.match(found, {
    onNone: () => Effect.succeed(undefined),
    onSome: ({ name, value }) =>
      Effect.try({
        try: () => readFileSync(value, "utf8"),
        catch: () => invalid(name, "names a file that cannot be read")
      })
  })

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
    const resourceAttributes = keyValues(Option.getOrElse(yield* setting("OTEL_RESOURCE_ATTRIBUTES"), () => ""))
    // As the specification orders them: OTEL_SERVICE_NAME, then the resource attributes' own.
    const serviceName = Option.getOrElse(
      yield* setting("OTEL_SERVICE_NAME"),
      () => resourceAttributes["service.name"] ?? "service-auth"
    )
    const sampler = samplerSettings(
      Option.getOrUndefined(yield* setting("OTEL_TRACES_SAMPLER")),
      Option.getOrUndefined(yield* setting("OTEL_TRACES_SAMPLER_ARG"))
    )

    const generalHeaders = keyValues(Option.getOrElse(yield* setting("OTEL_EXPORTER_OTLP_HEADERS"), () => ""))
    const headers = { ...generalHeaders, ...keyValues(Option.getOrElse(yield* setting("OTEL_EXPORTER_OTLP_TRACES_HEADERS"), () => "")) }
    const compressionSetting = yield* exporterSetting("COMPRESSION")
    const compression = Option.getOrElse(Option.map(compressionSetting, ({ value }) => value.toLowerCase()), () => "none")
    if (compression !== "gzip" && compression !== "none") {
      return yield* Effect.fail(invalid(Option.getOrThrow(compressionSetting).name, "must be gzip or none"))
    }
    const timeoutMillis = positive(Option.map(yield* exporterSetting("TIMEOUT"), ({ value }) => value), TIMEOUT_MS)
    const scheduleDelayMillis = positive(yield* setting("OTEL_BSP_SCHEDULE_DELAY"), SCHEDULE_DELAY_MS)
    const maxBatchSize = positive(yield* setting("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"), MAX_BATCH_SIZE)
    const ca = yield* fileOf(yield* exporterSetting("CERTIFICATE"))
    const cert = yield* fileOf(yield* exporterSetting("CLIENT_CERTIFICATE"))
    const key = yield* fileOf(yield* exporterSetting("CLIENT_KEY"))
    const tls = { ...(ca === undefined ? {} : { ca }), ...(cert === undefined ? {} : { cert }), ...(key === undefined ? {} : { key }) }
    const ignored: Array<string> = []
    for (const name of IGNORED) if (Option.isSome(yield* setting(name))) ignored.push(name)
    return Option.some({
      tracesUrl,
      protocol,
      serviceName,
      sampler,
      headers,
      compression,
      timeoutMillis,
      scheduleDelayMillis,
      maxBatchSize,
      tls,
      resourceAttributes,
      ignored
    })
  }
)
