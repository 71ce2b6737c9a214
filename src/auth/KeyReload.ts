/**
 * When an instance reloads its signing keys: every 2 s, and on demand (a token naming a kid this
 * instance does not hold, the JWKS), one load at a time, with on-demand loads at least 200 ms
 * apart so that garbage kids cannot hammer the database.
 */
import { Clock, Duration, Effect, Schedule } from "effect"

const PERIODIC_RELOAD = Duration.seconds(2)
/** On-demand loads (unknown kids, the JWKS) start at least this far apart: garbage kids cost 5 reads a second at most. */
const ON_DEMAND_SPACING_MILLIS = 200

/**
 * `reload` runs `loadOnce` now (after any load running); `reloadOnDemand` waits for a load that starts
 * after the call (callers arriving together share one) and never fails; `reloadPeriodically` is the
 * background loop, to fork in the service's scope.
 */
export const makeKeyReload = <E extends { readonly description: string }>(loadOnce: Effect.Effect<void, E>) =>
  Effect.gen(function*() {
    const loadLock = yield* Effect.makeSemaphore(1)
    let loadsStarted = 0
    let lastOnDemandAt = Number.NEGATIVE_INFINITY
    const load = Effect.suspend(() => {
      loadsStarted++
      return loadOnce
    })
    const reload = loadLock.withPermits(1)(load)
    // The spacing protects the database, so it runs on real time whatever clock the schedule runs on.
    const spaced = Effect.withClock(Clock.make())(Effect.gen(function*() {
      const wait = lastOnDemandAt + ON_DEMAND_SPACING_MILLIS - (yield* Clock.currentTimeMillis)
      if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      lastOnDemandAt = yield* Clock.currentTimeMillis
    }))
    const reloadOnDemand = Effect.suspend(() => {
      const target = loadsStarted + 1
      return loadLock.withPermits(1)(Effect.suspend(() => (loadsStarted >= target ? Effect.void : Effect.zipRight(spaced, load))))
    }).pipe(Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`)))

    const reloadPeriodically = reload.pipe(
      Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`)),
      Effect.repeat(Schedule.spaced(PERIODIC_RELOAD))
    )
    /** Runs `effect` while no load runs (a load started meanwhile waits for it). */
    const exclusively = <A, E2, R>(effect: Effect.Effect<A, E2, R>) => loadLock.withPermits(1)(effect)
    return { exclusively, reload, reloadOnDemand, reloadPeriodically }
  })
