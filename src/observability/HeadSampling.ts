/**
 * Head sampling, decided before any span exists. OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG are
 * read once, here, as the OpenTelemetry SDK reads them (an unknown sampler is the default
 * `parentbased_always_on`; a missing or out-of-range ratio is 1). The fast lane and Effect's tracer
 * (`SdkSpans`, every span the app makes) both decide by `sampled`, so they decide alike, and as the
 * SDK's sampler for the same settings would (`test/HeadSampling.test.ts`, `test/SdkSpans.test.ts`).
 *
 * The fast lane asks `sampled` first, and a request it says no to gets no span object at all: a
 * profile of proxied calls at 10% sampling put a tenth of the request's CPU into building unrecorded
 * spans (the SDK's sampler, two ids, the span wrappers) for the 90% that export nothing.
 *
 * `traceidratio` is the SDK's deterministic function of the trace id. A new trace's id is drawn here
 * (from a pool of random bytes: four 32-bit words, hex only when needed), and when it is sampled the
 * id generator hands that id to the span made next (`LaneIdGenerator`), so the decision holds for
 * the trace id it was made on, and the trace's other spans follow it.
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

/** A caller's span context, from its `traceparent`. */
export interface CallerContext {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

/** The bound the SDK's `TraceIdRatioBasedSampler` compares with. */
const upperBound = (ratio: number) => ratio >= 1 ? 0x100000000 : ratio <= 0 ? 0 : Math.floor(ratio * 0xffffffff)

/** The SDK's accumulation of a hex trace id: its four 32-bit words, xor-ed. */
export const accumulate = (traceId: string): number => {
  let accumulation = 0
  for (let i = 0; i < 32; i += 8) accumulation = (accumulation ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0
  return accumulation
}

// Random bytes for ids, refilled 4 KiB at a time: one system call per 170 new traces. Not a server's
// state (bytes not yet used, which nothing can tell apart), so shared by every server of the process.
const POOL = Buffer.allocUnsafe(4096)
let poolUsed = POOL.length
const takeRandom = (bytes: number): number => {
  if (poolUsed + bytes > POOL.length) {
    randomFillSync(POOL)
    poolUsed = 0
  }
  const at = poolUsed
  poolUsed += bytes
  return at
}

/** A random id of `bytes` bytes in lowercase hex, never all zeros (W3C: an invalid id). */
export const randomHexId = (bytes: 8 | 16): string => {
  for (;;) {
    const at = takeRandom(bytes)
    const hex = POOL.toString("hex", at, at + bytes)
    if (!/^0+$/.test(hex)) return hex
  }
}

/**
 * The trace id a new sampled trace is to get: set just before its span is made, taken by
 * `LaneIdGenerator`. Not a server's state: it never outlives the synchronous call that makes the span
 * (`withDrawnTraceId` withdraws it).
 */
let drawnTraceId: string | undefined

/**
 * Whether a request is sampled, given its caller's context (if any). A new trace decided by ratio
 * leaves its trace id for the span about to be made (`withDrawnTraceId`).
 */
export const sampled = (settings: SamplerSettings, caller: CallerContext | undefined): boolean => {
  const parentBased = settings.name.startsWith("parentbased_")
  if (caller !== undefined && parentBased) return caller.sampled
  switch (settings.name) {
    case "always_on":
    case "parentbased_always_on":
      return true
    case "always_off":
    case "parentbased_always_off":
      return false
  }
  // traceidratio: on the caller's trace id when there is one, else on a new one, drawn here.
  const bound = upperBound(settings.ratio)
  if (caller !== undefined) return accumulate(caller.traceId) < bound
  if (bound === 0) return false
  const at = takeRandom(16)
  const words = (POOL.readUInt32BE(at) ^ POOL.readUInt32BE(at + 4) ^ POOL.readUInt32BE(at + 8) ^ POOL.readUInt32BE(at + 12)) >>> 0
  if (words >= bound) return false
  const id = POOL.toString("hex", at, at + 16)
  drawnTraceId = /^0+$/.test(id) ? undefined : id
  return drawnTraceId !== undefined
}

/** Runs `make` (which makes the new trace's root span) with the drawn trace id on offer, then withdraws it. */
export const withDrawnTraceId = <A>(make: () => A): A => {
  try {
    return make()
  } finally {
    drawnTraceId = undefined
  }
}

/** The shape of the SDK's `IdGenerator`. */
export interface IdGenerator {
  generateTraceId(): string
  generateSpanId(): string
}

/**
 * The tracer's id generator (`SdkSpans`): the trace id `sampled` drew for the span being made, when
 * there is one; otherwise (and for every span id) random ones, from the same pool.
 */
export class LaneIdGenerator implements IdGenerator {
  generateTraceId(): string {
    const drawn = drawnTraceId
    drawnTraceId = undefined
    return drawn ?? randomHexId(16)
  }
  generateSpanId(): string {
    return randomHexId(8)
  }
}
