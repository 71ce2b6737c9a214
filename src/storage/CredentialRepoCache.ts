/**
 * A read cache for the two hot reads (`findTokenTarget`, `findServiceRoute`), for the embedded
 * database only: there one process owns the data directory (see `DataDirLock`), so every write
 * passes through this object and the cache can be exact. Never used on PostgreSQL, where other
 * instances write.
 *
 * Exactness under concurrency: every write, once it has finished, bumps a generation counter and
 * empties the cache in one synchronous step; a read stores its result only if the generation did
 * not move while it ran. A read that raced a deletion may answer from before the deletion (the two
 * overlapped, so either order is correct), but can never leave "live" behind in the cache: after a
 * deletion is acknowledged, the next request reads the database.
 */
import { Effect, Option } from "effect"
import type { CredentialRepoShape } from "./CredentialRepo.js"

/** Entries kept at most; unknown names sent by clients must not grow memory without bound. */
const MAX_ENTRIES = 10_000

export const withReadCache = (repo: CredentialRepoShape): CredentialRepoShape => {
  let generation = 0
  const targets = new Map<string, Effect.Effect.Success<ReturnType<CredentialRepoShape["findTokenTarget"]>>>()
  const routes = new Map<string, Effect.Effect.Success<ReturnType<CredentialRepoShape["findServiceRoute"]>>>()

  const invalidate = Effect.sync(() => {
    generation++
    targets.clear()
    routes.clear()
  })
  const write = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.ensuring(effect, invalidate)

  /** `read` is only called on a miss: building the SQL effect is most of the cost of a hit otherwise. */
  const cached = <A, E, R>(cache: Map<string, A>, key: string, read: () => Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      const hit = cache.get(key)
      if (hit !== undefined) return Effect.succeed(hit)
      const startedAt = generation
      return Effect.tap(read(), (value) =>
        Effect.sync(() => {
          if (generation !== startedAt) return
          if (cache.size >= MAX_ENTRIES) cache.clear()
          cache.set(key, value)
        }))
    })

  const key = (address: { profile: string; environment: string; uuid: string }, clientId: Option.Option<string>) =>
    `${address.profile}\u0000${address.environment}\u0000${address.uuid}\u0000${Option.getOrElse(clientId, () => "")}`

  return {
    ...repo,
    putProfile: (...args) => write(repo.putProfile(...args)),
    deleteProfile: (...args) => write(repo.deleteProfile(...args)),
    putEnvironment: (...args) => write(repo.putEnvironment(...args)),
    deleteEnvironment: (...args) => write(repo.deleteEnvironment(...args)),
    putService: (...args) => write(repo.putService(...args)),
    deleteService: (...args) => write(repo.deleteService(...args)),
    applyCredentialChanges: (...args) => write(repo.applyCredentialChanges(...args)),
    touchCredential: (...args) => write(repo.touchCredential(...args)),
    findTokenTarget: (address, clientId) =>
      cached(targets, key(address, clientId), () => repo.findTokenTarget(address, clientId)),
    findServiceRoute: (address, clientId) =>
      cached(routes, key(address, clientId), () => repo.findServiceRoute(address, clientId)),
    peek: {
      tokenTarget: (address, clientId) => targets.get(key(address, clientId)),
      serviceRoute: (address, clientId) => routes.get(key(address, clientId))
    }
  }
}
