/**
 * What keeps a failing or slow upstream from taking the gateway down with it, per service and per
 * instance, in memory:
 *
 * - a circuit breaker: after FAILURES_TO_OPEN consecutive failures (5xx, timeouts, connection
 *   failures) the service is refused for a pause of 10 s; after the pause one trial call goes
 *   through (the others are still refused); a trial that fails doubles the pause (20 s, 40 s, at
 *   most 60 s), any success closes the breaker and forgets the pauses;
 * - a limit of calls in flight (UPSTREAM_MAX_CONCURRENCY): one more is refused at once.
 *
 * Both refusals are `503 temporarily_unavailable` with `Retry-After` (the rest of the pause, or 1 s).
 * Time is given by the caller (the app's `Clock`, so `TestClock` drives it in tests). Only services
 * with calls in flight, failures or an open breaker hold an entry, so memory follows the failing
 * services, not the catalogue; an entry without calls for FORGET_AFTER_MS leaves at the periodic
 * sweep (its breaker closed: the next call is a fresh start), and at most MAX_GUARDED_SERVICES idle
 * ones are held (about 800 bytes each with the longest names: 8 MB at most).
 */

export const FAILURES_TO_OPEN = 5
export const FIRST_PAUSE_MS = 10_000
export const LONGEST_PAUSE_MS = 60_000
/** A service's state is forgotten after this long without a call (a deleted service's, too). */
export const FORGET_AFTER_MS = 10 * 60_000
/** Services held at most: those with calls in flight, failures or an open breaker (a few, normally). */
export const MAX_GUARDED_SERVICES = 10_000

interface ServiceState {
  inFlight: number
  /** Consecutive failures while closed. */
  failures: number
  /** When open: the end of the current pause; 0 while closed. */
  openUntil: number
  pauseMs: number
  /** Whether the trial call of an elapsed pause is on its way. */
  trial: boolean
  /** The last admission or settlement. */
  touchedAt: number
}

export type Admission =
  | { readonly _tag: "Admitted"; readonly trial: boolean }
  | { readonly _tag: "Refused"; readonly reason: "open" | "saturated"; readonly retryAfterSeconds: number }

export interface UpstreamGuardShape {
  /** Whether a call to the service at `key` may go now; an admitted one must be `settle`d once. */
  readonly admit: (key: string, nowMillis: number) => Admission
  /** The end of an admitted call: `failing` when the upstream failed (5xx, timeout, connection). */
  readonly settle: (key: string, admission: { readonly trial: boolean }, failing: boolean, nowMillis: number) => void
  /** How many services are refused for a pause now (the gauge). */
  readonly openCount: () => number
  /** Forgets the services without a call for FORGET_AFTER_MS; answers how many. */
  readonly sweep: (nowMillis: number) => number
  /** Services held now (for tests of the bound). */
  readonly size: () => number
}

// Two shared answers: an admission is read, never changed, so none is made per call.
const ADMITTED: Admission = { _tag: "Admitted", trial: false }
const ADMITTED_TRIAL: Admission = { _tag: "Admitted", trial: true }

export const makeUpstreamGuard = (
  maxConcurrency: number,
  onOpenChange: (open: number) => void = () => {},
  maxServices: number = MAX_GUARDED_SERVICES
): UpstreamGuardShape => {
  const states = new Map<string, ServiceState>()
  let open = 0
  const setOpen = (state: ServiceState, isOpen: boolean) => {
    const wasOpen = state.openUntil > 0
    if (wasOpen === isOpen) return
    open += isOpen ? 1 : -1
    onOpenChange(open)
  }
  const forgetIfIdle = (key: string, state: ServiceState) => {
    if (state.inFlight === 0 && state.failures === 0 && state.openUntil === 0) states.delete(key)
  }

  const forget = (key: string, state: ServiceState) => {
    setOpen(state, false)
    states.delete(key)
  }
  const sweep = (nowMillis: number) => {
    let dropped = 0
    for (const [key, state] of states) {
      if (state.inFlight === 0 && nowMillis - state.touchedAt >= FORGET_AFTER_MS) {
        forget(key, state)
        dropped++
      }
    }
    return dropped
  }
  /** Room for one more: the idle services swept, then the idle one touched longest ago. */
  const makeRoom = (nowMillis: number) => {
    sweep(nowMillis)
    if (states.size < maxServices) return
    let oldest: [string, ServiceState] | undefined
    for (const entry of states) {
      if (entry[1].inFlight === 0 && (oldest === undefined || entry[1].touchedAt < oldest[1].touchedAt)) oldest = entry
    }
    if (oldest !== undefined) forget(oldest[0], oldest[1])
  }

  const admit = (key: string, nowMillis: number): Admission => {
    let state = states.get(key)
    if (state === undefined) {
      if (states.size >= maxServices) makeRoom(nowMillis)
      state = { inFlight: 0, failures: 0, openUntil: 0, pauseMs: 0, trial: false, touchedAt: nowMillis }
      states.set(key, state)
    }
    state.touchedAt = nowMillis
    let trial = false
    if (state.openUntil > 0) {
      if (nowMillis < state.openUntil) {
        return { _tag: "Refused", reason: "open", retryAfterSeconds: Math.max(1, Math.ceil((state.openUntil - nowMillis) / 1000)) }
      }
      // The pause is over: one trial call; the others wait for its verdict.
      if (state.trial) return { _tag: "Refused", reason: "open", retryAfterSeconds: 1 }
      trial = true
    }
    if (state.inFlight >= maxConcurrency) {
      forgetIfIdle(key, state)
      return { _tag: "Refused", reason: "saturated", retryAfterSeconds: 1 }
    }
    state.inFlight++
    if (trial) state.trial = true
    return trial ? ADMITTED_TRIAL : ADMITTED
  }

  const settle = (key: string, admission: { readonly trial: boolean }, failing: boolean, nowMillis: number) => {
    const state = states.get(key)
    if (state === undefined) return
    state.touchedAt = nowMillis
    state.inFlight--
    if (admission.trial) state.trial = false
    if (!failing) {
      // The upstream answers: closed, pauses forgotten.
      setOpen(state, false)
      state.failures = 0
      state.openUntil = 0
      state.pauseMs = 0
    } else if (admission.trial) {
      state.pauseMs = Math.min(state.pauseMs * 2, LONGEST_PAUSE_MS)
      state.openUntil = nowMillis + state.pauseMs
    } else if (state.openUntil === 0) {
      state.failures++
      if (state.failures >= FAILURES_TO_OPEN) {
        setOpen(state, true)
        state.failures = 0
        state.pauseMs = FIRST_PAUSE_MS
        state.openUntil = nowMillis + FIRST_PAUSE_MS
      }
    }
    forgetIfIdle(key, state)
  }

  return { admit, settle, openCount: () => open, sweep, size: () => states.size }
}
