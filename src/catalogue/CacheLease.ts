/**
 * When an instance on PostgreSQL may trust its cache: the state of its lease, as a state machine
 * over the monotonic clock it is given (`performance.now()` in the server, `TestClock` in tests). The connection
 * that keeps the lease and listens for changes is `CacheCoherence`; the argument that no
 * interleaving breaks the invariant is docs/cache-coherence.md.
 *
 * The cache is trusted only while all of this holds:
 * - the listening connection is up, and has been since the renewal that granted the trust began;
 * - the clock has not passed the trust's end: the renewal's start plus the lease, minus a margin
 *   (the database's copy of the lease, which deleters wait on, ends later than that);
 * - no renewal has been waiting for its answer longer than `RENEWAL_PATIENCE_MS` (while one has,
 *   the cache is not used, but it is not emptied either: a late answer that arrives before the
 *   trust's end resumes it as it was; only trust that actually ends starts a new generation);
 * - nothing was announced that this instance has not dropped from its cache: an announcement of
 *   the version right after the last one seen, saying what it changed, evicts just that (the
 *   cache's `evict`); any other news (a gap in versions, an announcement that does not say, a
 *   renewal that finds a newer version than the last one seen) starts a new generation (the cache
 *   then drops every entry).
 */
import type { CatalogueScope } from "./CatalogueScope.js"
import type { CacheGuard } from "./CredentialRepoCache.js"

/** How long a lease is valid in the database after its renewal. */
export const LEASE_MS = 2_000
/** How often a lease is renewed: several renewals may fail before it runs out. */
export const RENEW_EVERY_MS = 500
/**
 * Trust ends this much before the lease the database holds: room for the clocks of this host and
 * the database's to run at slightly different rates, and for timers that fire late.
 */
export const TRUST_MARGIN_MS = 250

/**
 * A renewal unanswered for longer than this suspends the cache's use until it is answered: a
 * database that stopped answering (a partition, a hung server) is noticed within `RENEW_EVERY_MS`
 * plus this, not only when the lease runs out. Renewals take milliseconds, but on a machine
 * starved of CPU an answer can wait in the event loop longer than this: the suspension keeps the
 * entries, since safety rests on the trust's end alone (docs/cache-coherence.md).
 */
export const RENEWAL_PATIENCE_MS = 300

/** A renewal under way: when it began, on which listening connection. */
export interface RenewalAttempt {
  readonly startedAt: number
  readonly connection: number
}

/** `generation` and `invalidate` are the cache's guard (`CacheGuard`); `CacheCoherence` adds `settle`. */
export class CacheLease implements Omit<CacheGuard, "settle"> {
  /** What the cache evicts for a change it is told the scopes of (set by the cache). */
  private evict: ((scopes: ReadonlyArray<CatalogueScope>) => void) | undefined = undefined
  private current = 0
  private trustedUntil = Number.NEGATIVE_INFINITY
  /** The listening connection that is up (0: none). */
  private connection = 0
  /** The latest catalogue version this instance has dropped its cache for. */
  private seen = -1n
  /** When the renewal under way began, if one is. */
  private outstanding: number | undefined = undefined

  /** `now`: a monotonic clock in milliseconds. */
  constructor(private readonly now: () => number) {}

  readonly generation = (): number | undefined => {
    const now = this.now()
    if (now >= this.trustedUntil) {
      if (this.trustedUntil !== Number.NEGATIVE_INFINITY) this.distrust()
      return undefined
    }
    // Read through while a renewal is overdue, without emptying: what the cache holds is as exact
    // as before (announcements are still applied), and trust still ends at `trustedUntil`.
    if (this.outstanding !== undefined && now - this.outstanding > RENEWAL_PATIENCE_MS) return undefined
    return this.current
  }

  readonly invalidate = (): void => {
    this.current++
  }

  /** The version to acknowledge: every change up to it has been dropped. */
  get seenVersion(): bigint {
    return this.seen
  }

  /** Whether the cache may be used now (for logs and tests). */
  get trusted(): boolean {
    return this.generation() !== undefined
  }

  /** A listening connection (numbered from 1) is up; trust still waits for its first renewal. */
  listening(connection: number): void {
    this.distrust()
    this.connection = connection
  }

  /** The listening connection is gone: changes may be missed from now on. */
  listenLost(): void {
    this.connection = 0
    this.outstanding = undefined
    this.distrust()
  }

  readonly onScopedChange = (evict: (scopes: ReadonlyArray<CatalogueScope>) => void): void => {
    this.evict = evict
  }

  /**
   * A change was committed; returns whether it was news (then what it changed was dropped: its
   * scopes when it follows the last version seen and says them, the whole cache otherwise).
   * Committed versions have no holes (a write that rolls back counts nothing), so a version that
   * does not follow on means announcements were missed.
   */
  announced(version: bigint, scopes?: ReadonlyArray<CatalogueScope>): boolean {
    if (version <= this.seen) return false
    const followsOn = version === this.seen + 1n
    this.seen = version
    if (followsOn && scopes !== undefined && this.evict !== undefined) this.evict(scopes)
    else this.current++
    return true
  }

  renewalStarted(): RenewalAttempt {
    const startedAt = this.now()
    this.outstanding ??= startedAt
    return { startedAt, connection: this.connection }
  }

  /**
   * The catalogue version a renewal read, under the lock every catalogue write takes: anything
   * newer than what was seen is dropped now (true), to be acknowledged next.
   */
  versionRead(version: bigint): boolean {
    return this.announced(version)
  }

  /** The renewal committed: trust until its start plus the lease, less the margin. */
  renewed(attempt: RenewalAttempt): void {
    if (attempt.connection === 0 || attempt.connection !== this.connection) return
    this.outstanding = undefined
    // Trust that ran out before this renewal began may have missed an announcement in between.
    if (attempt.startedAt >= this.trustedUntil) this.current++
    this.trustedUntil = Math.max(this.trustedUntil, attempt.startedAt + LEASE_MS - TRUST_MARGIN_MS)
  }

  private distrust(): void {
    this.trustedUntil = Number.NEGATIVE_INFINITY
    this.current++
  }
}
