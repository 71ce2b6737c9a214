/**
 * The catalogue's narrow services seen together, for the suites that exercise every operation of a
 * store (the repository suite, the cache's tests): what each flow sees apart, merged into one value.
 */
import { Effect } from "effect"
import type { CachedCatalogue, CatalogueStore } from "../../src/catalogue/CredentialRepoCache.js"
import { CatalogueLookup, type CatalogueLookupShape } from "../../src/catalogue/CatalogueLookup.js"
import { CatalogueQueries, type CatalogueQueriesShape } from "../../src/catalogue/CatalogueQueries.js"
import { CatalogueWrites, type CatalogueWritesShape } from "../../src/catalogue/CatalogueWrites.js"
import { LastUse, type LastUseShape } from "../../src/catalogue/LastUse.js"

export type WholeCatalogue = CatalogueLookupShape & CatalogueQueriesShape & CatalogueWritesShape & LastUseShape & {
  readonly peek: CatalogueLookupShape
}

/** The four services of one cached catalogue as one value (`peek`: the cache's synchronous reads). */
export const wholeOf = (parts: Omit<CachedCatalogue, "maintain">): WholeCatalogue => ({
  ...parts.queries,
  ...parts.writes,
  ...parts.lastUse,
  ...parts.lookup,
  peek: parts.lookup
})

/** The catalogue provided by a storage layer, whole. */
export const Catalogue = Effect.gen(function*() {
  return wholeOf({
    lookup: yield* CatalogueLookup,
    queries: yield* CatalogueQueries,
    writes: yield* CatalogueWrites,
    lastUse: yield* LastUse
  })
})

/** A hand-made store (a test's stub with the few operations it needs) in the shape the cache wraps. */
export const storeOf = (operations: object): CatalogueStore =>
  ({ reads: operations, queries: operations, writes: operations, lastUse: operations }) as unknown as CatalogueStore
