/**
 * A read cache for the two hot reads (`findTokenTarget`, `findServiceRoute`), exact because a
 * `CacheGuard` says when its entries may be used:
 *
 * - on the embedded database (`localGuard`), this process is the only writer (see `DataDirLock`),
 *   so every write passes through this object and empties the cache;
 * - on PostgreSQL (`CacheCoherence`), other instances write too: the guard trusts the cache only
 *   while the instance holds a valid lease, and starts a new generation whenever a change was
 *   announced (docs/cache-coherence.md).
 *
 * Exactness under concurrency: a write, once it has finished, starts a new generation and empties
 * the cache in one synchronous step; a read stores its result only if the generation did not move
 * while it ran and the cache is still trusted. A read that raced a deletion may answer from before
 * the deletion (the two overlapped, so either order is correct), but can never leave "live" behind
 * in the cache: after a deletion is acknowledged, the next request reads the database.
 *
 * `last_used_at` is not part of the catalogue: recording it does not invalidate anything, the
 * entry of the credential is updated in place instead (so it is written at most once a minute).
 */
import { Effect, Option } from "effect"
import type { ClientId } from "../domain/Identifiers.js"
import type { CredentialRepoShape, ServiceRoute, TokenTarget } from "./CredentialRepo.js"

/** Says whether, and from which generation on, cached entries may be used. */
export interface CacheGuard {
  /**
   * The current generation while entries may be used, or undefined while they may not (then every
   * read goes to the database and nothing is stored). Entries of an earlier generation are dropped.
   */
  readonly generation: () => number | undefined
  /** Starts a new generation: called when this instance has changed the catalogue. */
  readonly invalidate: () => void
  /** Returns once every other instance has dropped what this instance's last write changed. */
  readonly settle: Effect.Effect<void>
}

/** For a database only this process writes: always trusted, a new generation at each write. */
export const localGuard = (): CacheGuard => {
  let generation = 0
  return { generation: () => generation, invalidate: () => void generation++, settle: Effect.void }
}

/** Entries kept at most; unknown names sent by clients must not grow memory without bound. */
const MAX_ENTRIES = 10_000

/**
 * `traced`: each hot read in a span `CredentialRepoCache.<read>` whose `cache.hit` says whether the
 * cache answered (only when traces are exported: a hit must cost next to nothing).
 */
export const withReadCache = (repo: CredentialRepoShape, guard: CacheGuard, traced = false): CredentialRepoShape => {
  let heldGeneration = -1
  const targets = new Map<string, Option.Option<TokenTarget>>()
  const routes = new Map<string, Option.Option<ServiceRoute>>()

  /** The generation whose entries may be used now (dropping older ones), or undefined. */
  const usable = (): number | undefined => {
    const generation = guard.generation()
    if (generation !== heldGeneration && (targets.size > 0 || routes.size > 0)) {
      targets.clear()
      routes.clear()
    }
    if (generation !== undefined) heldGeneration = generation
    return generation
  }

  /** Catalogue writes: this cache is emptied at once, then the others are waited for. */
  const write = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.ensuring(effect, Effect.sync(() => {
      guard.invalidate()
      usable()
    })).pipe(Effect.tap(() => guard.settle))

  /** `read` is only called on a miss: building the SQL effect is most of the cost of a hit otherwise. */
  const lookup = <A, E, R>(cache: Map<string, A>, key: string, read: () => Effect.Effect<A, E, R>, hit: (hit: boolean) => void) =>
    Effect.suspend(() => {
      const startedAt = usable()
      const held = startedAt === undefined ? undefined : cache.get(key)
      hit(held !== undefined)
      if (held !== undefined) return Effect.succeed(held)
      if (startedAt === undefined) return read()
      return Effect.tap(read(), (value) =>
        Effect.sync(() => {
          if (usable() !== startedAt) return
          if (cache.size >= MAX_ENTRIES) cache.clear()
          cache.set(key, value)
        }))
    })

  const noRecord = () => {}
  const cached = <A, E, R>(name: string, cache: Map<string, A>, key: string, read: () => Effect.Effect<A, E, R>) =>
    traced
      ? Effect.useSpan(
        `CredentialRepoCache.${name}`,
        { captureStackTrace: false },
        (span) => Effect.withParentSpan(lookup(cache, key, read, (hit) => span.attribute("cache.hit", hit)), span)
      )
      : lookup(cache, key, read, noRecord)

  const key = (address: { profile: string; environment: string; uuid: string }, clientId: Option.Option<string>) =>
    `${address.profile}\u0000${address.environment}\u0000${address.uuid}\u0000${Option.getOrElse(clientId, () => "")}`

  /** The recorded `last_used_at`, in the entries that hold this credential. */
  const touched = (clientId: ClientId, now: Date) => {
    for (const [entryKey, target] of targets) {
      if (Option.isSome(target) && Option.isSome(target.value.credential) && target.value.credential.value.clientId === clientId) {
        targets.set(entryKey, Option.some({
          ...target.value,
          credential: Option.some({ ...target.value.credential.value, lastUsedAt: now })
        }))
      }
    }
  }

  return {
    ...repo,
    putProfile: (...args) => write(repo.putProfile(...args)),
    deleteProfile: (...args) => write(repo.deleteProfile(...args)),
    putEnvironment: (...args) => write(repo.putEnvironment(...args)),
    deleteEnvironment: (...args) => write(repo.deleteEnvironment(...args)),
    putService: (...args) => write(repo.putService(...args)),
    deleteService: (...args) => write(repo.deleteService(...args)),
    applyCredentialChanges: (...args) => write(repo.applyCredentialChanges(...args)),
    touchCredential: (clientId, now) =>
      Effect.tap(repo.touchCredential(clientId, now), () => Effect.sync(() => touched(clientId, now))),
    findTokenTarget: (address, clientId) =>
      cached("findTokenTarget", targets, key(address, clientId), () => repo.findTokenTarget(address, clientId)),
    findServiceRoute: (address, clientId) =>
      cached("findServiceRoute", routes, key(address, clientId), () => repo.findServiceRoute(address, clientId)),
    peek: {
      tokenTarget: (address, clientId) => usable() === undefined ? undefined : targets.get(key(address, clientId)),
      serviceRoute: (address, clientId) => usable() === undefined ? undefined : routes.get(key(address, clientId))
    }
  }
}
