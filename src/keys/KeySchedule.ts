/**
 * The signing-key schedule, computed from stored times alone so that every instance sharing a
 * database agrees on it at any moment (given clocks within `INSTANCE_CLOCK_SKEW_SECONDS`), with no message
 * between them: keys in `active_from` order (then in the order they were added), each one
 *
 * - `next` before its `active_from` (published, verifies, does not sign yet);
 * - `active` from its `active_from` until the following key's (the one key that signs);
 * - `retiring` from then (`superseded_at`) until its last possible token has expired:
 *   `retires_at` = `superseded_at` + the token lifetime + the tolerated clock skew;
 * - `retired` after that: listed by the admin API, gone from the JWKS, never verifies.
 */
import { INSTANCE_CLOCK_SKEW_SECONDS, TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"

export type KeyStatus = "next" | "active" | "retiring" | "retired"

/** How long a superseded key keeps verifying: its last token's lifetime plus the tolerated skew. */
export const RETIRE_AFTER_MILLIS = (TOKEN_LIFETIME_SECONDS + INSTANCE_CLOCK_SKEW_SECONDS) * 1000

export interface ScheduledTimes {
  readonly kid: string
  readonly activeFrom: number
  /** The order keys were added in: of two keys starting at the same moment, the later one signs. */
  readonly position: number
}

export interface Scheduled<K extends ScheduledTimes> {
  readonly key: K
  /** When the following key starts signing; undefined while none is scheduled. */
  readonly supersededAt: number | undefined
  /** When it stops verifying; undefined while no following key is scheduled. */
  readonly retiresAt: number | undefined
}

const order = (a: ScheduledTimes, b: ScheduledTimes) => a.activeFrom - b.activeFrom || a.position - b.position

/** The keys in schedule order (oldest first), with the times that do not depend on the clock. */
export const schedule = <K extends ScheduledTimes>(keys: ReadonlyArray<K>): ReadonlyArray<Scheduled<K>> => {
  const sorted = [...keys].sort(order)
  return sorted.map((key, index) => {
    const following = sorted[index + 1]
    return following === undefined
      ? { key, supersededAt: undefined, retiresAt: undefined }
      : { key, supersededAt: following.activeFrom, retiresAt: following.activeFrom + RETIRE_AFTER_MILLIS }
  })
}

export const statusAt = (scheduled: Scheduled<ScheduledTimes>, nowMillis: number): KeyStatus =>
  nowMillis < scheduled.key.activeFrom
    ? "next"
    : scheduled.supersededAt === undefined || nowMillis < scheduled.supersededAt
    ? "active"
    : nowMillis < scheduled.retiresAt!
    ? "retiring"
    : "retired"

/** Whether a key verifies tokens (and is published) at `nowMillis`: next, active or retiring. */
export const verifiesAt = (scheduled: Scheduled<ScheduledTimes>, nowMillis: number): boolean =>
  scheduled.retiresAt === undefined || nowMillis < scheduled.retiresAt
