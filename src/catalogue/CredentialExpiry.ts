/**
 * The audit side of credential expiry. Refusing an expired credential needs nothing
 * here: the token and service-call decisions compare its `expires_at` with their clock, so it is
 * refused on every instance at the same moment, with no event to propagate. What remains is the
 * trail's `credential.expired`, written once (`CatalogueWrites.recordExpiries`, a conditional
 * UPDATE that only one instance wins) by a sweep every second.
 *
 * The sweep is paced on the real clock, like every background loop of storage, but reads the
 * time from the server's clock, so that a test that moves `TestClock` sees the event within a
 * second of moving it, and a server sees it within a second of the expiry.
 */
import { Clock, Effect, Layer } from "effect"
import { CatalogueWrites } from "./CatalogueWrites.js"

/** How often each instance looks for credentials that expired and were not recorded yet. */
export const EXPIRY_SWEEP_INTERVAL = "1 second"

export const layer = Layer.scopedDiscard(
  Effect.gen(function*() {
    const writes = yield* CatalogueWrites
    const clock = yield* Effect.clock
    const sweep = Effect.suspend(() => writes.recordExpiries(new Date(clock.unsafeCurrentTimeMillis()))).pipe(
      // Storage unavailable: the next sweep records what this one could not.
      Effect.catchAll(() => Effect.void),
      Effect.catchAllDefect((defect) => Effect.logWarning("The credential expiry sweep failed", defect))
    )
    yield* Effect.forkScoped(
      Effect.forever(Effect.zipRight(Effect.sleep(EXPIRY_SWEEP_INTERVAL), sweep)).pipe(Effect.withClock(Clock.make()))
    )
  })
)
