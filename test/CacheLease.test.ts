/**
 * When an instance on PostgreSQL may serve from its cache (docs/cache-coherence.md), with time
 * driven by `TestClock`: trust only after a renewal on a listening connection, never past the
 * renewal's start plus the lease less the margin, withdrawn at once when the listening connection
 * is lost, and a new generation (an emptied cache) for every change announced or read, and for
 * trust regained after it lapsed. Then the same through the cache itself (`withReadCache`): hits
 * only while trusted, nothing stored while not, and a read racing a change never stores.
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Option, TestClock } from "effect"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CacheLease, LEASE_MS, RENEW_EVERY_MS, RENEWAL_PATIENCE_MS, TRUST_MARGIN_MS } from "../src/catalogue/CacheLease.js"
import type { CatalogueReads, ServiceRoute } from "../src/catalogue/CatalogueLookup.js"
import type { ServiceAddress } from "../src/domain/ServiceAddress.js"
import { type CatalogueStore, withReadCache } from "../src/catalogue/CredentialRepoCache.js"

const TRUST_MS = LEASE_MS - TRUST_MARGIN_MS

/** A lease on `TestClock`'s time, listening on connection 1 and renewed once. */
const renewedLease = Effect.gen(function*() {
  const clock = yield* Effect.clock
  const lease = new CacheLease(() => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n))
  lease.listening(1)
  lease.renewed(lease.renewalStarted())
  return lease
})

const advance = (ms: number) => TestClock.adjust(Duration.millis(ms))

it.effect("a new lease is not trusted until its first renewal on a listening connection", () =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const lease = new CacheLease(() => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n))
    expect(lease.generation()).toBeUndefined()
    // A renewal with no listening connection grants nothing: changes could be missed.
    lease.renewed(lease.renewalStarted())
    expect(lease.generation()).toBeUndefined()
    lease.listening(1)
    expect(lease.generation()).toBeUndefined()
    lease.renewed(lease.renewalStarted())
    expect(lease.generation()).toBeTypeOf("number")
  }))

it.effect("trust ends at the renewal's start plus the lease less the margin; renewals extend it", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const generation = lease.generation()
    yield* advance(TRUST_MS - 1)
    expect(lease.generation()).toBe(generation)
    yield* advance(1)
    expect(lease.generation()).toBeUndefined()

    // Renewed on schedule, the same generation stays trusted indefinitely.
    const steady = yield* renewedLease
    const kept = steady.generation()
    for (let i = 0; i < 20; i++) {
      yield* advance(RENEW_EVERY_MS)
      steady.renewed(steady.renewalStarted())
      expect(steady.generation()).toBe(kept)
    }
  }))

it.effect("the trust of a renewal counts from when it began, however late its answer", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    yield* advance(RENEW_EVERY_MS)
    const attempt = lease.renewalStarted()
    // The answer arrives 1.5 s later (a slow database, a paused process).
    yield* advance(1_500)
    lease.renewed(attempt)
    yield* advance(TRUST_MS - 1_500 - 1)
    expect(lease.generation()).toBeTypeOf("number")
    yield* advance(1)
    expect(lease.generation()).toBeUndefined()
  }))

it.effect("a paused instance finds its trust gone, and regains it only with an emptied cache", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    yield* advance(10_000) // SIGSTOP, then SIGCONT
    expect(lease.generation()).toBeUndefined()
    lease.renewed(lease.renewalStarted())
    const after = lease.generation()
    expect(after).toBeTypeOf("number")
    expect(after).not.toBe(before)
  }))

it.effect("trust lapsed unseen (no request in between) still empties the cache when regained", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    yield* advance(TRUST_MS + 100)
    // No one asked in between; the next renewal begins after the trust ran out.
    lease.renewed(lease.renewalStarted())
    expect(lease.generation()).not.toBe(before)
  }))

it.effect("losing the listening connection withdraws trust at once; a renewal of the old connection does not restore it", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    const attempt = lease.renewalStarted()
    lease.listenLost()
    expect(lease.generation()).toBeUndefined()
    lease.renewed(attempt)
    expect(lease.generation()).toBeUndefined()
    // A new connection, then a renewal on it: trusted again, with an emptied cache.
    lease.listening(2)
    lease.renewed(attempt)
    expect(lease.generation()).toBeUndefined()
    lease.renewed(lease.renewalStarted())
    expect(lease.generation()).toBeTypeOf("number")
    expect(lease.generation()).not.toBe(before)
  }))

it.effect("each newer version announced or read starts a new generation; older ones do not", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    expect(lease.versionRead(7n)).toBe(true)
    const at7 = lease.generation()
    expect(lease.seenVersion).toBe(7n)
    expect(lease.announced(7n)).toBe(false)
    expect(lease.announced(5n)).toBe(false)
    expect(lease.versionRead(7n)).toBe(false)
    expect(lease.generation()).toBe(at7)
    expect(lease.announced(8n)).toBe(true)
    expect(lease.generation()).not.toBe(at7)
    expect(lease.seenVersion).toBe(8n)
    // A local write starts a new generation too.
    const at8 = lease.generation()
    lease.invalidate()
    expect(lease.generation()).not.toBe(at8)
  }))

// ---------------------------------------------------------------------------------------------
// Through the cache

const ADDRESS: ServiceAddress = {
  profile: "acme" as ProfileId,
  environment: "production" as EnvironmentName,
  uuid: "6f1c2a4e-8b3d-4c5e-9f10-1a2b3c4d5e6f" as ServiceUuid
}
const CLIENT = Option.some("svc_0123456789abcdef0123456789abcdef" as ClientId)

/** A repository whose one service route is `live` (switchable), counting its reads. */
const countingRepo = (gate?: Deferred.Deferred<void>) => {
  const state = { reads: 0, live: true }
  const reads = {
    findServiceRoute: () =>
      Effect.gen(function*() {
        state.reads++
        const live = state.live
        if (gate !== undefined) yield* Deferred.await(gate)
        return Option.some<ServiceRoute>({ authType: "oauth", handler: { type: "echo" }, credentialLive: live })
      })
  }
  return { state, repo: { reads } as unknown as CatalogueStore }
}

const routeIsLive = (repo: CatalogueReads) =>
  Effect.map(repo.findServiceRoute(ADDRESS, CLIENT), (route) => Option.getOrThrow(route).credentialLive)

it.effect("the cache answers hits only while trusted, reads through and stores nothing while not", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const { repo, state } = countingRepo()
    const cached = withReadCache(repo, { generation: lease.generation, invalidate: lease.invalidate, settle: Effect.void })

    yield* routeIsLive(cached.lookup)
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(1)
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeDefined()

    yield* advance(TRUST_MS)
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    yield* routeIsLive(cached.lookup)
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(3)

    // Trusted again: the entry read while untrusted was not kept.
    lease.renewed(lease.renewalStarted())
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    state.live = false
    expect(yield* routeIsLive(cached.lookup)).toBe(false)
    expect(state.reads).toBe(4)
  }))

it.effect("an announced change empties the cache: the next request reads the deletion", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const { repo, state } = countingRepo()
    const cached = withReadCache(repo, { generation: lease.generation, invalidate: lease.invalidate, settle: Effect.void })
    expect(yield* routeIsLive(cached.lookup)).toBe(true)
    state.live = false
    expect(yield* routeIsLive(cached.lookup)).toBe(true) // still cached: nothing was announced
    lease.announced(1n)
    expect(yield* routeIsLive(cached.lookup)).toBe(false)
  }))

it.effect("a read that began before a change was announced does not store its answer", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const gate = yield* Deferred.make<void>()
    const { repo, state } = countingRepo(gate)
    const cached = withReadCache(repo, { generation: lease.generation, invalidate: lease.invalidate, settle: Effect.void })
    const racing = yield* Effect.fork(routeIsLive(cached.lookup))
    yield* Effect.yieldNow()
    // The deletion commits and is announced while the read is under way.
    state.live = false
    lease.announced(1n)
    yield* Deferred.succeed(gate, undefined)
    expect(yield* Fiber.join(racing)).toBe(true) // overlapping: either answer is correct
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    expect(yield* routeIsLive(cached.lookup)).toBe(false)
    expect(state.reads).toBe(2)
  }))

it.effect("a renewal left unanswered beyond the patience withdraws trust until it is answered", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    yield* advance(RENEW_EVERY_MS)
    const attempt = lease.renewalStarted() // the database stops answering
    yield* advance(RENEWAL_PATIENCE_MS)
    expect(lease.generation()).toBe(before)
    yield* advance(1)
    expect(lease.generation()).toBeUndefined()
    // The answer comes after all, before the trust's end: trusted again, from the renewal's start,
    // with the same generation (nothing was missed: announcements were applied meanwhile).
    lease.renewed(attempt)
    expect(lease.generation()).toBe(before)
    yield* advance(TRUST_MS - RENEWAL_PATIENCE_MS - 2)
    expect(lease.generation()).toBe(before)
    yield* advance(1)
    expect(lease.generation()).toBeUndefined()
  }))

it.effect("an overdue renewal still lets announcements through: what changed meanwhile is a new generation", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    const attempt = lease.renewalStarted()
    yield* advance(RENEWAL_PATIENCE_MS + 1)
    expect(lease.generation()).toBeUndefined()
    expect(lease.announced(1n)).toBe(true)
    lease.renewed(attempt)
    expect(lease.generation()).toBeTypeOf("number")
    expect(lease.generation()).not.toBe(before)
  }))

it.effect("a renewal answered only after the trust's end does not restore it; the next one does, emptied", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const before = lease.generation()
    yield* advance(RENEW_EVERY_MS)
    const attempt = lease.renewalStarted() // a starved event loop: the answer waits 1.3 s
    yield* advance(RENEWAL_PATIENCE_MS + 1)
    expect(lease.generation()).toBeUndefined()
    yield* advance(TRUST_MS - RENEWAL_PATIENCE_MS - 1)
    expect(lease.generation()).toBeUndefined()
    // Its trust (from its start) has ended too by the time it is answered.
    lease.renewed(attempt)
    expect(lease.generation()).toBeUndefined()
    lease.renewed(lease.renewalStarted())
    expect(lease.generation()).toBeTypeOf("number")
    expect(lease.generation()).not.toBe(before)
  }))

it.effect("a slow renewal answered before the trust's end keeps the cache; reads go through meanwhile and store nothing", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const { repo, state } = countingRepo()
    const cached = withReadCache(repo, { generation: lease.generation, invalidate: lease.invalidate, settle: Effect.void })
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(1)

    yield* advance(RENEW_EVERY_MS)
    const attempt = lease.renewalStarted() // a starved machine: the answer waits
    yield* advance(RENEWAL_PATIENCE_MS + 1)
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(2)

    lease.renewed(attempt)
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeDefined()
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(2)
  }))

it.effect("a change announced while a renewal is overdue is evicted from the kept entries", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const { repo, state } = countingRepo()
    const cached = withReadCache(repo, {
      generation: lease.generation,
      invalidate: lease.invalidate,
      settle: Effect.void,
      onScopedChange: lease.onScopedChange
    })
    expect(yield* routeIsLive(cached.lookup)).toBe(true)
    const attempt = lease.renewalStarted()
    yield* advance(RENEWAL_PATIENCE_MS + 1)
    // The deletion commits and is announced, with its scope, while the renewal waits.
    state.live = false
    expect(lease.announced(0n, [[ADDRESS.profile, ADDRESS.environment, ADDRESS.uuid]])).toBe(true)
    lease.renewed(attempt)
    expect(lease.generation()).toBeTypeOf("number")
    expect(yield* routeIsLive(cached.lookup)).toBe(false)
    expect(state.reads).toBe(2)
  }))

it.effect("a slow renewal answered after the trust's end does not bring the cache back", () =>
  Effect.gen(function*() {
    const lease = yield* renewedLease
    const { repo, state } = countingRepo()
    const cached = withReadCache(repo, { generation: lease.generation, invalidate: lease.invalidate, settle: Effect.void })
    yield* routeIsLive(cached.lookup)
    yield* advance(RENEW_EVERY_MS)
    const attempt = lease.renewalStarted()
    yield* advance(TRUST_MS)
    lease.renewed(attempt)
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    yield* routeIsLive(cached.lookup)
    expect(state.reads).toBe(2)
    lease.renewed(lease.renewalStarted())
    // Trusted again, emptied: the entry from before is gone, the one read now is stored.
    expect(cached.lookup.serviceRoute(ADDRESS, CLIENT)).toBeUndefined()
    state.live = false
    expect(yield* routeIsLive(cached.lookup)).toBe(false)
    expect(state.reads).toBe(3)
  }))
