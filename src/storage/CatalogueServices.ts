/**
 * The catalogue as the flows see it: one store (SQL or memory) behind its read cache, offered as
 * narrow services, each flow depending only on what it uses: the hot read (`CatalogueLookup`), the
 * writes (`CatalogueWrites`), the other reads (`CatalogueQueries`) and the last use
 * (`UsageRecord`); and whole (`CredentialRepo`) for the repository suite.
 */
import { Context, Effect, type Scope } from "effect"
import { type CacheGuard, withReadCache } from "../catalogue/CredentialRepoCache.js"
import { tracerEnabled } from "../observability/Tracing.js"
import { CatalogueLookup } from "./CatalogueLookup.js"
import { CatalogueQueries } from "./CatalogueQueries.js"
import { CatalogueWrites } from "./CatalogueWrites.js"
import { type CachedCatalogue, CredentialRepo, type CredentialRepoShape } from "./CredentialRepo.js"
import { UsageRecord } from "./UsageRecord.js"

export type CatalogueServices = CatalogueLookup | CatalogueWrites | CatalogueQueries | UsageRecord | CredentialRepo

/**
 * Each operation of the store in a span `CredentialRepo.<operation>`, below the cache's own spans
 * (its SQL statements are spans of their own below it). Only where traces are exported.
 */
const storeSpans = (store: CredentialRepoShape): CredentialRepoShape => {
  const span = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.withSpan(effect, `CredentialRepo.${operation}`, { captureStackTrace: false })
  return {
    ping: span("ping")(store.ping),
    countCatalogue: span("countCatalogue")(store.countCatalogue),
    countExpiring: (...args) => span("countExpiring")(store.countExpiring(...args)),
    recordExpiries: (...args) => span("recordExpiries")(store.recordExpiries(...args)),
    credentialLifetime: (...args) => span("credentialLifetime")(store.credentialLifetime(...args)),
    upstreamOrigins: (...args) => span("upstreamOrigins")(store.upstreamOrigins(...args)),
    listProfiles: span("listProfiles")(store.listProfiles),
    getProfile: (...args) => span("getProfile")(store.getProfile(...args)),
    putProfile: (...args) => span("putProfile")(store.putProfile(...args)),
    deleteProfile: (...args) => span("deleteProfile")(store.deleteProfile(...args)),
    putEnvironment: (...args) => span("putEnvironment")(store.putEnvironment(...args)),
    deleteEnvironment: (...args) => span("deleteEnvironment")(store.deleteEnvironment(...args)),
    getService: (...args) => span("getService")(store.getService(...args)),
    putService: (...args) => span("putService")(store.putService(...args)),
    deleteService: (...args) => span("deleteService")(store.deleteService(...args)),
    applyCredentialChanges: (...args) => span("applyCredentialChanges")(store.applyCredentialChanges(...args)),
    findTokenTarget: (...args) => span("findTokenTarget")(store.findTokenTarget(...args)),
    // The span's name from before the operation was renamed: what dashboards already know.
    recordUse: (...args) => span("touchCredential")(store.recordUse(...args)),
    recordUseSync: store.recordUseSync,
    findClientCredential: (...args) => span("findClientCredential")(store.findClientCredential(...args)),
    revokeToken: (...args) => span("revokeToken")(store.revokeToken(...args)),
    setIntrospectProfiles: (...args) => span("setIntrospectProfiles")(store.setIntrospectProfiles(...args)),
    findServiceRoute: (...args) => span("findServiceRoute")(store.findServiceRoute(...args)),
    liveServices: (...args) => span("liveServices")(store.liveServices(...args))
  }
}

/** The narrow services over one cached catalogue. */
export const servicesOf = (catalogue: CachedCatalogue, traced: boolean): Context.Context<CatalogueServices> =>
  Context.make(CatalogueLookup, {
    ...catalogue.peek,
    findTokenTarget: catalogue.findTokenTarget,
    findServiceRoute: catalogue.findServiceRoute
  }).pipe(
    Context.add(CatalogueWrites, {
      putProfile: catalogue.putProfile,
      deleteProfile: catalogue.deleteProfile,
      putEnvironment: catalogue.putEnvironment,
      deleteEnvironment: catalogue.deleteEnvironment,
      putService: catalogue.putService,
      deleteService: catalogue.deleteService,
      applyCredentialChanges: catalogue.applyCredentialChanges,
      revokeToken: catalogue.revokeToken,
      setIntrospectProfiles: catalogue.setIntrospectProfiles,
      recordExpiries: catalogue.recordExpiries,
      dropCached: catalogue.dropCached
    }),
    Context.add(CatalogueQueries, {
      ping: catalogue.ping,
      countCatalogue: catalogue.countCatalogue,
      countExpiring: catalogue.countExpiring,
      credentialLifetime: catalogue.credentialLifetime,
      upstreamOrigins: catalogue.upstreamOrigins,
      liveServices: catalogue.liveServices,
      listProfiles: catalogue.listProfiles,
      getProfile: catalogue.getProfile,
      getService: catalogue.getService,
      findClientCredential: catalogue.findClientCredential
    }),
    Context.add(UsageRecord, { recordUse: catalogue.recordUse, recordUseSync: traced ? undefined : catalogue.recordUseSync }),
    Context.add(CredentialRepo, catalogue)
  )

/**
 * The store behind its read cache, which loads the live catalogue in the background (misses read
 * the store meanwhile) for as long as the scope lasts; when traces are exported (read as this is
 * made), with a span for each store operation and each cache read.
 */
export const make = <E, R, EG, RG>(
  store: Effect.Effect<CredentialRepoShape, E, R>,
  guard: Effect.Effect<CacheGuard, EG, RG>
): Effect.Effect<Context.Context<CatalogueServices>, E | EG, R | RG | Scope.Scope> =>
  Effect.gen(function*() {
    const traced = yield* tracerEnabled
    const repo = yield* store
    const { maintain, ...cached } = withReadCache(traced ? storeSpans(repo) : repo, yield* guard, traced)
    yield* Effect.forkScoped(maintain)
    return servicesOf(cached, traced)
  })
