import { Clock, Effect } from "effect"

/** The current time from Effect's `Clock`, so `TestClock` controls every stored timestamp. */
export const currentDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
