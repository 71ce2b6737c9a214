/**
 * When an instance reloads its signing keys: every 2 s, and on demand (a token naming a kid this
 * instance does not hold, the JWKS), one load at a time, with on-demand loads at least 200 ms
 * apart so that garbage kids cannot hammer the database.
 */
import { Clock, Deferred, Duration, Effect, Option, Schedule, type Scope, SynchronizedRef } from "effect"

const PERIODIC_RELOAD = Duration.seconds(2)
/** On-demand loads (unknown kids, the JWKS) start at least this far apart: garbage kids cost 5 reads a second at most. */
const ON_DEMAND_SPACING_MILLIS = 200

/**
 * `reload` runs `loadOnce` now (after any load running); `reloadOnDemand` waits for a load that
 * starts after the call (callers arriving together share one, a `Deferred` they all await) and
 * never fails; `reloadPeriodically` is the background loop, to fork in the service's scope.
 */
export const makeKeyReload = <E extends { readonly description: string }>(
  loadOnce: Effect.Effect<void, E>
): Effect.Effect<
  {
    readonly exclusively: <A, E2, R>(effect: Effect.Effect<A, E2, R>) => Effect.Effect<A, E2, R>
    readonly reload: Effect.Effect<void, E>
    readonly reloadOnDemand: Effect.Effect<void>
    readonly reloadPeriodically: Effect.Effect<never>
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const loadLock = yield* Effect.makeSemaphore(1)
    /** Runs `effect` while no load runs (a load started meanwhile waits for it). */
    const exclusively = <A, E2, R>(effect: Effect.Effect<A, E2, R>) => loadLock.withPermits(1)(effect)
    const reload = exclusively(loadOnce)

    // The spacing protects the database, so it runs on real time whatever clock the schedule runs on.
    const lastOnDemandAt = yield* SynchronizedRef.make(Number.NEGATIVE_INFINITY)
    const spaced = Effect.withClock(Clock.make())(SynchronizedRef.updateEffect(lastOnDemandAt, (last) =>
      Effect.gen(function*() {
        const wait = last + ON_DEMAND_SPACING_MILLIS - (yield* Clock.currentTimeMillis)
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        return yield* Clock.currentTimeMillis
      })))

    /** The on-demand load that has not started yet: whoever asks now joins it. */
    const pending = yield* SynchronizedRef.make(Option.none<Deferred.Deferred<void, E>>())
    const startOnDemand = Effect.gen(function*() {
      const done = yield* Deferred.make<void, E>()
      // Once it starts, later callers need a load of their own: it may not see what they wait for.
      const load = Effect.zipRight(SynchronizedRef.set(pending, Option.none()), loadOnce)
      yield* Effect.zipRight(spaced, exclusively(load)).pipe(
        Effect.exit,
        Effect.flatMap((exit) => Deferred.done(done, exit)),
        Effect.forkIn(scope)
      )
      return done
    })
    const reloadOnDemand = SynchronizedRef.modifyEffect(pending, (current) =>
      Option.match(current, {
        onSome: (done) => Effect.succeed([done, current] as const),
        onNone: () => Effect.map(startOnDemand, (done) => [done, Option.some(done)] as const)
      })).pipe(
        Effect.flatMap(Deferred.await),
        Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`))
      )

    const reloadPeriodically = reload.pipe(
      Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`)),
      Effect.repeat(Schedule.spaced(PERIODIC_RELOAD)),
      Effect.zipRight(Effect.never)
    )
    return { exclusively, reload, reloadOnDemand, reloadPeriodically }
  })
