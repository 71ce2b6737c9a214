/**
 * A credential's `last_used_at`: the last time it was used at all, by a token request or by a
 * service call made with a token it issued. Each kind of use notes a credential at most once per
 * `LAST_USE_RESOLUTION`, so the recorded time is at most that far behind the last use; a note never
 * moves it backwards (`laterUse`), whatever order notes of different kinds arrive in.
 */
import { Duration } from "effect"

/** How far behind the last use `last_used_at` may be: a use is noted at most once per this. */
export const LAST_USE_RESOLUTION = Duration.minutes(1)
const RESOLUTION_MILLIS = Duration.toMillis(LAST_USE_RESOLUTION)

/** Whether a use at `nowMillis` must be noted, given the last one noted (never, or a resolution ago). */
export const lastUseIsStale = (notedMillis: number | null | undefined, nowMillis: number): boolean =>
  notedMillis === null || notedMillis === undefined || nowMillis - notedMillis >= RESOLUTION_MILLIS

/** The later of a recorded last use and a new one: `last_used_at` only ever moves forward. */
export const laterUse = (recorded: Date | null | undefined, used: Date): Date =>
  recorded === null || recorded === undefined || used.getTime() > recorded.getTime() ? used : recorded
