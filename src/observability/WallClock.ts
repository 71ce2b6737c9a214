/**
 * Span times: the wall clock, at nanosecond resolution from hrtime (which is not wall-clock time),
 * so that the fast lane's spans and events line up with Effect's.
 */
const nowNanos = () => process.hrtime.bigint()
const EPOCH_OFFSET = BigInt(Date.now()) * 1_000_000n - nowNanos()

/** The wall-clock time of `hr` (`process.hrtime.bigint()`, now by default), in nanoseconds. */
export const wallNanos = (hr: bigint = nowNanos()) => hr + EPOCH_OFFSET
