/**
 * Head sampling, decided once per trace, where it starts here: OTEL_TRACES_SAMPLER and
 * OTEL_TRACES_SAMPLER_ARG are read as the OpenTelemetry SDK reads them (an unknown sampler is the
 * default `parentbased_always_on`; a missing or out-of-range ratio is 1), and decided as its
 * samplers decide: `parentbased_*` follows the caller's sampled flag, `traceidratio` is the SDK's
 * deterministic function of the trace id (so a downstream sampler with the same ratio agrees).
 *
 * Nothing here is shared between servers: the random bytes for ids are an `IdSource`, made by the
 * tracer's layer and gone with it.
 */
import { randomFillSync } from "node:crypto"

export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio"

export interface SamplerSettings {
  readonly name: SamplerName
  /** The traceidratio samplers' ratio, in [0, 1]. */
  readonly ratio: number
}

const NAMES: ReadonlyArray<string> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
]

/**
 * The settings from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, with the SDK's fallbacks (its
 * `buildSamplerFromEnv`): blank or unknown names the default, a blank, non-numeric or out-of-range ratio is 1.
 */
export const samplerSettings = (sampler: string | undefined, arg: string | undefined): SamplerSettings => {
  const name = sampler === undefined || sampler.trim() === "" ? "parentbased_always_on" : sampler
  const ratio = arg === undefined || arg.trim() === "" ? NaN : Number(arg)
  return {
    name: NAMES.includes(name) ? name as SamplerName : "parentbased_always_on",
    ratio: Number.isNaN(ratio) || ratio < 0 || ratio > 1 ? 1 : ratio
  }
}

/** The bound the SDK's `TraceIdRatioBasedSampler` compares with. */
const upperBound = (ratio: number) => ratio >= 1 ? 0x100000000 : ratio <= 0 ? 0 : Math.floor(ratio * 0xffffffff)

/** The SDK's accumulation of a hex trace id: its four 32-bit words, xor-ed. */
export const accumulate = (traceId: string): number => {
  let accumulation = 0
  for (let i = 0; i < 32; i += 8) accumulation = (accumulation ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0
  return accumulation
}

/** What a trace's first span here needs decided: a caller's sampled flag, or nothing but a trace id. */
export type Origin =
  | { readonly _tag: "Caller"; readonly traceId: string; readonly sampled: boolean }
  | { readonly _tag: "New" }

/**
 * The decision for a trace's first span here, when it can be made without a trace id: true or
 * false, or "ByTraceId" when it is the ratio's on the trace id (`sampledTraceId`) of a new trace.
 */
export const decide = (settings: SamplerSettings, origin: Origin): boolean | "ByTraceId" => {
  if (origin._tag === "Caller" && settings.name.startsWith("parentbased_")) return origin.sampled
  switch (settings.name) {
    case "always_on":
    case "parentbased_always_on":
      return true
    case "always_off":
    case "parentbased_always_off":
      return false
  }
  const bound = upperBound(settings.ratio)
  if (bound === 0) return false
  if (bound === 0x100000000) return true
  return origin._tag === "Caller" ? accumulate(origin.traceId) < bound : "ByTraceId"
}

/** The ratio samplers' decision on `traceId`. */
export const sampledTraceId = (settings: SamplerSettings, traceId: string): boolean => accumulate(traceId) < upperBound(settings.ratio)

/**
 * Random ids for the spans that are not recorded (their ids still travel in a `traceparent`): random
 * bytes drawn 4 KiB at a time, one system call per 170 trace ids. One per tracer, gone with it.
 */
export class IdSource {
  private readonly pool = Buffer.allocUnsafe(4096)
  private used = this.pool.length

  /** A random id of `bytes` bytes in lowercase hex, never all zeros (W3C: an invalid id). */
  hex(bytes: 8 | 16): string {
    for (;;) {
      if (this.used + bytes > this.pool.length) {
        randomFillSync(this.pool)
        this.used = 0
      }
      const at = this.used
      this.used += bytes
      const hex = this.pool.toString("hex", at, at + bytes)
      if (!/^0+$/.test(hex)) return hex
    }
  }
}
