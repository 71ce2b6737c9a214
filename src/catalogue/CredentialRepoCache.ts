/**
 * A read cache for the two hot reads (`findTokenTarget`, `findServiceRoute`), exact because a
 * `CacheGuard` says when its entries may be used, and every write evicts what it changed:
 *
 * - on the embedded database (`localGuard`), this process is the only writer (see `DataDirLock`),
 *   so every write passes through this object and evicts its scopes (`writeScopes`);
 * - on PostgreSQL (`CacheCoherence`), other instances write too: the guard trusts the cache only
 *   while the instance holds a valid lease; an announced change evicts the scopes it names, and
 *   anything the instance cannot account for (a gap in versions, a lost connection) starts a new
 *   generation, which empties the cache (docs/cache-coherence.md).
 *
 * The cache holds the live catalogue: `maintain` loads it from the first hot read on (in pages,
 * while serving: a start never waits for it, nor shares the database with it) and reloads each
 * scope a write evicted (first uses are memory hits too), bounded by `CatalogueMemory`.
 *
 * Exactness under concurrency: a write, once it has finished, evicts its scopes in one synchronous
 * step; a read (or a load) stores its result only if no eviction of its service, and no new
 * generation, happened while it ran, and the cache is still trusted. A read that raced a deletion
 * may answer from before the deletion (the two overlapped, so either order is correct), but can
 * never leave "live" behind in the cache: after a deletion is acknowledged, the next request
 * reads the database or an entry read after the deletion.
 *
 * `last_used_at` is not part of the catalogue: recording it evicts nothing; the credential's entry
 * (`byClient`, O(1)) is updated in place, at most once a minute. `recordUseSync` records it
 * synchronously (the fast path's way: most token requests are some credential's first in a minute).
 */
import { Clock, Effect, Option } from "effect"
import type { ClientId } from "../domain/Identifiers.js"
import { laterUse } from "../domain/LastUse.js"
import { CatalogueMemory, MAX_LIVE_ENTRIES, MAX_NEGATIVE_ENTRIES } from "./CatalogueMemory.js"
import { type CatalogueScope, writeScopes } from "./CatalogueScope.js"
import { type CatalogueLookupShape, type CatalogueReads, revokedSet, type ServiceRoute, type TokenTarget } from "./CatalogueLookup.js"
import type { CatalogueQueriesShape, LiveService } from "./CatalogueQueries.js"
import type { CatalogueStoreWrites, CatalogueWritesShape } from "./CatalogueWrites.js"
import type { LastUseShape } from "./LastUse.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"

/** Says whether, and from which generation on, cached entries may be used. */
export interface CacheGuard {
  /**
   * The current generation while entries may be used, or undefined while they may not (then every
   * read goes to the database and nothing is stored). Entries of an earlier generation are dropped.
   */
  readonly generation: () => number | undefined
  /** Starts a new generation: every entry is dropped. */
  readonly invalidate: () => void
  /** Returns once every other instance has dropped what this instance's last write changed. */
  readonly settle: Effect.Effect<void>
  /** Where the guard reports changes made elsewhere whose scopes it knows (PostgreSQL). */
  readonly onScopedChange?: (evict: (scopes: ReadonlyArray<CatalogueScope>) => void) => void
}

/** For a database only this process writes: always trusted; its writes evict what they change. */
export const localGuard = (): CacheGuard => {
  let generation = 0
  return { generation: () => generation, invalidate: () => void generation++, settle: Effect.void }
}

/** Services read a page at a time when loading: a page is one short statement. */
const LOAD_PAGE = 500
/**
 * A pause after each page: the connection's semaphore wakes its waiters in a later task, so a loop
 * that takes it again at once would keep every request's read waiting until the whole load ended
 * (measured: a first token 23 s late with 100,000 credentials). After the pause a read waits for
 * one page at most.
 */
const PAGE_PAUSE = "1 millis"
/** Scopes waiting to be reloaded, at most; past it, the whole catalogue is reloaded instead. */
const MAX_PENDING_RELOADS = 10_000

type Answer = Option.Option<TokenTarget> | Option.Option<ServiceRoute>

/** A store of the catalogue (SQL or memory) as the cache wraps it: each flow's part apart. */
export interface CatalogueStore {
  readonly reads: CatalogueReads
  readonly queries: CatalogueQueriesShape
  readonly writes: CatalogueStoreWrites
  readonly lastUse: LastUseShape
}

/** The store behind its cache: the hot reads answered from memory when held, writes evicting what they change. */
export interface CachedCatalogue {
  readonly lookup: CatalogueLookupShape
  readonly queries: CatalogueQueriesShape
  readonly writes: CatalogueWritesShape
  readonly lastUse: LastUseShape
  /** Loads the live catalogue, then reloads what writes evict; runs as long as the cache (fork it). */
  readonly maintain: Effect.Effect<never>
}

const targetKey = (address: ServiceAddress, clientId: Option.Option<string>) =>
  `t\u0000${address.profile}\u0000${address.environment}\u0000${address.uuid}\u0000${Option.getOrElse(clientId, () => "")}`
const routeKey = (address: ServiceAddress, clientId: Option.Option<string>) =>
  `r\u0000${address.profile}\u0000${address.environment}\u0000${address.uuid}\u0000${Option.getOrElse(clientId, () => "")}`

/** Answers about a live credential belong to the live store; anything else is a negative answer. */
const targetIsLive = (target: Option.Option<TokenTarget>) => Option.isSome(target) && Option.isSome(target.value.credential)
const routeIsLive = (route: Option.Option<ServiceRoute>) => Option.isSome(route) && route.value.credentialLive

/**
 * `traced`: each hot read in a span `CredentialRepoCache.<read>` whose `cache.hit` says whether the
 * cache answered (only when traces are exported: a hit must cost next to nothing).
 */
export const withReadCache = (
  store: CatalogueStore,
  guard: CacheGuard,
  traced = false,
  capacities: { readonly live: number; readonly negative: number } = {
    live: MAX_LIVE_ENTRIES,
    negative: MAX_NEGATIVE_ENTRIES
  }
): CachedCatalogue => {
  const { lastUse, queries, reads, writes } = store
  let heldGeneration: number | undefined = undefined
  /** Generations held so far: every one after the first empties a cache that was loaded. */
  let generationsHeld = 0
  /** The token-target entry of each live credential held, for `recordUse`. */
  const byClient = new Map<string, string>()
  const memory = new CatalogueMemory<Answer>(capacities, (key, value) => {
    if (key.startsWith("t") && Option.isSome<unknown>(value)) {
      const credential = (value as Option.Some<TokenTarget>).value.credential
      if (Option.isSome(credential) && byClient.get(credential.value.clientId) === key) {
        byClient.delete(credential.value.clientId)
      }
    }
  })

  /**
   * The generation whose entries may be used now (emptying the cache when it moved), or undefined.
   * While undefined the entries are kept, unused (evictions still apply to them): the guard says
   * the same generation again only if they are still exact (a renewal that answered late).
   */
  const usable = (): number | undefined => {
    const generation = guard.generation()
    if (generation !== heldGeneration && generation !== undefined) {
      memory.clear()
      heldGeneration = generation
      // Emptied for a change it cannot tell (or trust regained): loaded again from the start.
      if (generationsHeld++ > 0) reloadLater(undefined)
    }
    return generation
  }

  /** Whether a hot read has come (the catalogue is loaded from then on), and who waits for it. */
  let inUse = false
  let onFirstUse: (() => void) | undefined = undefined
  const firstUse = () => {
    inUse = true
    onFirstUse?.()
    onFirstUse = undefined
  }

  // Reloads: scopes keyed by their JSON; the key "*" (undefined scope) is the whole catalogue.
  const reloads = new Map<string, CatalogueScope | undefined>()
  let wake: (() => void) | undefined = undefined
  const reloadLater = (scope: CatalogueScope | undefined) => {
    if (reloads.has("*")) return
    if (scope === undefined || reloads.size >= MAX_PENDING_RELOADS) {
      reloads.clear()
      reloads.set("*", undefined)
    } else {
      reloads.set(JSON.stringify(scope), scope)
    }
    wake?.()
  }

  /** `reload`: false after a deletion, whose scopes hold nothing live any more (nothing to read back). */
  const evict = (scopes: ReadonlyArray<CatalogueScope>, reload = true) => {
    usable()
    memory.evict(scopes)
    if (reload) { for (const scope of scopes) reloadLater(scope) }
  }
  guard.onScopedChange?.(evict)

  const storeTarget = (mark: number, key: string, address: ServiceAddress, target: Option.Option<TokenTarget>) => {
    const live = targetIsLive(target)
    if (!memory.store(mark, key, address.profile, address.environment, address.uuid, target, live)) return
    if (live) byClient.set((target as Option.Some<TokenTarget>).value.credential.pipe(Option.getOrThrow).clientId, key)
  }
  const storeRoute = (mark: number, key: string, address: ServiceAddress, route: Option.Option<ServiceRoute>) =>
    void memory.store(mark, key, address.profile, address.environment, address.uuid, route, routeIsLive(route))

  /** Every positive answer about a loaded service. */
  const storeService = (mark: number, service: LiveService) => {
    for (const { clientId: id, expiresAt, lastUsedAt, revoked, secretHash } of service.credentials) {
      const clientId = Option.some(id)
      const credential = Option.some({ clientId: id, secretHash, lastUsedAt, expiresAt })
      storeTarget(
        mark,
        targetKey(service, clientId),
        service,
        Option.some({
          authType: service.authType,
          requireDpop: service.requireDpop,
          credential
        })
      )
      const revokedTokens = revokedSet(revoked)
      storeRoute(
        mark,
        routeKey(service, clientId),
        service,
        Option.some({
          authType: service.authType,
          handler: service.handler,
          credentialLive: true,
          credentialExpiresAt: expiresAt === null ? null : expiresAt.getTime(),
          rateLimit: service.rateLimit,
          requireDpop: service.requireDpop,
          upstreamApproved: service.upstreamApproved,
          upstreamOrigins: service.upstreamOrigins,
          ...(revokedTokens === undefined ? {} : { revokedTokens })
        })
      )
    }
  }

  /** Loads a scope (the whole catalogue when undefined), page by page; false when it had to stop. */
  const load = (scope: CatalogueScope | undefined) =>
    Effect.gen(function*() {
      const liveServices = queries.liveServices
      let after: ServiceAddress | undefined = undefined
      while (true) {
        const startedAt = usable()
        if (startedAt === undefined) return false
        const mark = memory.mark()
        const page: ReadonlyArray<LiveService> = yield* liveServices(scope, after, LOAD_PAGE)
        if (usable() !== startedAt) return false
        for (const service of page) storeService(mark, service)
        if (page.length < LOAD_PAGE) return true
        // A full store would only evict what was loaded: the rest is read on demand.
        if (memory.live.size >= memory.live.capacity) return true
        after = page[page.length - 1]
        yield* Effect.sleep(PAGE_PAUSE)
      }
    })

  const nextReload = Effect.async<CatalogueScope | undefined>((resume) => {
    const take = () => {
      const first = reloads.entries().next()
      if (first.done === true) return false
      reloads.delete(first.value[0])
      resume(Effect.succeed(first.value[1]))
      return true
    }
    if (take()) return
    wake = () => {
      wake = undefined
      take()
    }
    return Effect.sync(() => {
      wake = undefined
    })
  })

  const maintain: Effect.Effect<never> = Effect.gen(function*() {
    // The whole catalogue first, from the first hot read on, once the cache may be used
    // (PostgreSQL: after the first renewal). Not before: on the embedded database each page runs
    // on the event loop, and a start with 100,000 credentials was kept from answering for as long
    // as the load took.
    yield* Effect.async<void>((resume) => {
      if (inUse) return resume(Effect.void)
      onFirstUse = () => resume(Effect.void)
    })
    reloadLater(undefined)
    while (true) {
      const scope = yield* nextReload
      const loaded = yield* Effect.orElseSucceed(load(scope), () => false)
      // Not trusted, a new generation, or the database unavailable: again shortly.
      if (!loaded) {
        yield* Effect.sleep(scope === undefined ? "500 millis" : "100 millis")
        reloadLater(scope)
      }
    }
    // Retries are paced on the real clock, like every background loop of storage, whatever clock a test moves.
  }).pipe(Effect.withClock(Clock.make()))

  /** Catalogue writes: what they change is evicted here at once, then the others are waited for. */
  const write = (scopes: ReadonlyArray<CatalogueScope>, reload = true) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.ensuring(effect, Effect.sync(() => evict(scopes, reload))).pipe(Effect.tap(() => guard.settle))
  const deletion = (scopes: ReadonlyArray<CatalogueScope>) => write(scopes, false)

  /** `read` is only called on a miss: building the SQL effect is most of the cost of a hit otherwise. */
  const lookup = <A extends Answer, E, R>(
    key: string,
    read: () => Effect.Effect<A, E, R>,
    store: (mark: number, value: A) => void,
    hit: (hit: boolean) => void
  ) =>
    Effect.suspend(() => {
      if (!inUse) firstUse()
      const startedAt = usable()
      const held = startedAt === undefined ? undefined : memory.get(key) as A | undefined
      hit(held !== undefined)
      if (held !== undefined) return Effect.succeed(held)
      if (startedAt === undefined) return read()
      const mark = memory.mark()
      return Effect.tap(read(), (value) =>
        Effect.sync(() => {
          if (usable() === startedAt) store(mark, value)
        }))
    })

  const noRecord = () => {}
  const cached = <A extends Answer, E, R>(
    name: string,
    key: string,
    read: () => Effect.Effect<A, E, R>,
    store: (mark: number, value: A) => void
  ) =>
    traced
      ? Effect.useSpan(
        `CredentialRepoCache.${name}`,
        { captureStackTrace: false },
        (span) => Effect.withParentSpan(lookup(key, read, store, (hit) => span.attribute("cache.hit", hit)), span)
      )
      : lookup(key, read, store, noRecord)

  /** A use recorded in the cached entry of this credential (its `last_used_at`). */
  const recordUseHeld = (clientId: ClientId, now: Date) => {
    const key = byClient.get(clientId)
    if (key === undefined) return
    const target = memory.live.get(key) as Option.Option<TokenTarget> | undefined
    if (target === undefined || Option.isNone(target) || Option.isNone(target.value.credential)) return
    memory.live.update(
      key,
      Option.some({
        ...target.value,
        credential: Option.some({ ...target.value.credential.value, lastUsedAt: laterUse(target.value.credential.value.lastUsedAt, now) })
      })
    )
  }

  /** A use recorded synchronously, and in the credential's entry, where the repository can. */
  const recordUseSync = (clientId: ClientId, now: Date) => {
    lastUse.recordUseSync(clientId, now)
    recordUseHeld(clientId, now)
  }

  return {
    queries,
    writes: {
      putProfile: (profile, now, actor, lifetimeDays, upstreamOrigins) =>
        write(writeScopes.profilePolicy(profile, upstreamOrigins))(writes.putProfile(profile, now, actor, lifetimeDays, upstreamOrigins)),
      deleteProfile: (profile, ...rest) => deletion(writeScopes.profile(profile))(writes.deleteProfile(profile, ...rest)),
      putEnvironment: (profile, environment, ...rest) => write(writeScopes.created())(writes.putEnvironment(profile, environment, ...rest)),
      deleteEnvironment: (profile, environment, ...rest) =>
        deletion(writeScopes.environment(profile, environment))(writes.deleteEnvironment(profile, environment, ...rest)),
      putService: (address, ...rest) => write(writeScopes.service(address))(writes.putService(address, ...rest)),
      deleteService: (address, ...rest) => deletion(writeScopes.service(address))(writes.deleteService(address, ...rest)),
      applyCredentialChanges: (profile, changes, ...rest) =>
        write(writeScopes.credentials(profile, changes))(writes.applyCredentialChanges(profile, changes, ...rest)),
      // A revocation changes its service's routes: evicted here, and by every instance before the answer.
      revokeToken: (revocation, ...rest) => write(writeScopes.service(revocation.address))(writes.revokeToken(revocation, ...rest)),
      // Neither changes what the cache holds: introspection reads its permissions uncached, and an
      // expiry is decided against each cached entry's own `expiresAt`.
      setIntrospectProfiles: (...args) => writes.setIntrospectProfiles(...args),
      recordExpiries: (now) => writes.recordExpiries(now),
      dropCached: Effect.zipRight(Effect.sync(() => guard.invalidate()), guard.settle)
    },
    lastUse: {
      recordUse: (clientId, now) => Effect.tap(lastUse.recordUse(clientId, now), () => Effect.sync(() => recordUseHeld(clientId, now))),
      recordUseSync
    },
    lookup: {
      findTokenTarget: (address, clientId) => {
        const key = targetKey(address, clientId)
        return cached(
          "findTokenTarget",
          key,
          () => reads.findTokenTarget(address, clientId),
          (mark, value) => storeTarget(mark, key, address, value)
        )
      },
      findServiceRoute: (address, clientId) => {
        const key = routeKey(address, clientId)
        return cached(
          "findServiceRoute",
          key,
          () => reads.findServiceRoute(address, clientId),
          (mark, value) => storeRoute(mark, key, address, value)
        )
      },
      epoch: () => {
        if (!inUse) firstUse()
        return usable()
      },
      tokenTarget: (address, clientId) => {
        if (!inUse) firstUse()
        return usable() === undefined ? undefined : memory.get(targetKey(address, clientId)) as Option.Option<TokenTarget> | undefined
      },
      serviceRoute: (address, clientId) => {
        if (!inUse) firstUse()
        return usable() === undefined ? undefined : memory.get(routeKey(address, clientId)) as Option.Option<ServiceRoute> | undefined
      }
    },
    maintain
  }
}
