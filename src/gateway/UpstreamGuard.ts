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
 * services, not the catalogue.
 */

export const FAILURES_TO_OPEN = 5
export const FIRST_PAUSE_MS = 10_000
export const LONGEST_PAUSE_MS = 60_000

interface ServiceState {
  inFlight: number
  /** Consecutive failures while closed. */
  failures: number
  /** When open: the end of the current pause; 0 while closed. */
  openUntil: number
  pauseMs: number
  /** Whether the trial call of an elapsed pause is on its way. */
  trial: boolean
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
}

// Two shared answers: an admission is read, never changed, so none is made per call.
const ADMITTED: Admission = { _tag: "Admitted", trial: false }
const ADMITTED_TRIAL: Admission = { _tag: "Admitted", trial: true }

export const makeUpstreamGuard = (maxConcurrency: number, onOpenChange: (open: number) => void = () => {}): UpstreamGuardShape => {
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

  const admit = (key: string, nowMillis: number): Admission => {
    let state = states.get(key)
    if (state === undefined) {
      state = { inFlight: 0, failures: 0, openUntil: 0, pauseMs: 0, trial: false }
      states.set(key, state)
    }
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

  return { admit, settle, openCount: () => open }
}
