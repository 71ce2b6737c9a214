/**
 * A map bounded in entries whose entries also leave by themselves when they expire: the building
 * block of every in-memory table that grows with tokens, clients, callers, addresses or services.
 *
 * - At most `max` entries: a new key past it evicts the entry set longest ago (insertion order,
 *   which a `set` renews), so memory is bounded whatever the keys are, even ones a caller chooses.
 * - An expired entry is never answered (`get` drops it), and leaves without being asked for: each
 *   `set` drops up to two expired entries from the front (the oldest), and `sweep` drops every
 *   expired one (its owner runs it periodically, so an idle server empties its tables too).
 *
 * O(1) per `get`/`set`; `sweep` is O(entries). Not thread-safe, like everything on the event loop.
 */
import { Clock, Duration, Effect } from "effect"

interface Entry<V> {
  value: V
  expiresAt: number
}

export class ExpiringEntries<K, V> {
  private readonly entries = new Map<K, Entry<V>>()
  /** Entries evicted while still live, since the start: a sign that `max` is too small for the load. */
  evicted = 0

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new Error(`ExpiringEntries needs a bound of at least 1, got ${max}`)
  }

  get size(): number {
    return this.entries.size
  }

  /** The live value of `key` at `nowMillis`; an expired one is dropped and not answered. */
  get(key: K, nowMillis: number): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAt <= nowMillis) {
      this.entries.delete(key)
      return undefined
    }
    return entry.value
  }

  /** Sets `key` until `expiresAt` (ms), as the newest entry. */
  set(key: K, value: V, expiresAt: number, nowMillis: number): void {
    this.entries.delete(key)
    this.dropExpiredFront(nowMillis, 2)
    if (this.entries.size >= this.max) {
      const [oldest, entry] = this.entries.entries().next().value!
      this.entries.delete(oldest)
      if (entry.expiresAt > nowMillis) this.evicted++
    }
    this.entries.set(key, { value, expiresAt })
  }

  delete(key: K): void {
    this.entries.delete(key)
  }

  /** Drops every expired entry; answers how many went. */
  sweep(nowMillis: number): number {
    let dropped = 0
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= nowMillis) {
        this.entries.delete(key)
        dropped++
      }
    }
    return dropped
  }

  private dropExpiredFront(nowMillis: number, atMost: number): void {
    for (const [key, entry] of this.entries) {
      if (atMost-- <= 0 || entry.expiresAt > nowMillis) return
      this.entries.delete(key)
    }
  }
}

/** What a periodic sweep needs of a table. */
export interface Sweepable {
  readonly sweep: (nowMillis: number) => number
}

/** How often the tables of a layer drop their expired entries when nothing else does. */
export const SWEEP_EVERY = Duration.minutes(1)

/**
 * Sweeps `tables` every `every` for as long as the layer's scope lasts: the expired entries leave
 * even when no request comes. The tables' time is the app's `Clock` (a test's `TestClock`), but the
 * wait between sweeps is real time: a test that moves its clock by years must not run a sweep for
 * every minute in between.
 */
export const sweepPeriodically = (tables: ReadonlyArray<Sweepable>, every: Duration.DurationInput = SWEEP_EVERY) =>
  Effect.flatMap(Effect.clock, (clock) =>
    Effect.sync(() => {
      const now = clock.unsafeCurrentTimeMillis()
      tables.forEach((table) => table.sweep(now))
    }).pipe(
      Effect.delay(every),
      Effect.forever,
      Effect.withClock(Clock.make()),
      Effect.forkScoped,
      Effect.asVoid
    ))
