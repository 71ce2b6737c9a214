/**
 * The catalogue's other reads, none of them hot: the admin API's documents, the metrics' counts,
 * a profile's credential policy and upstream origins, the live services (the cache's loads, the
 * start-up report of upstreams outside the policy), a credential found by its client id alone (the
 * revocation and introspection endpoints), and whether storage answers at all (`/readyz`).
 */
import { Context, type Effect, type Option } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import type { AuthType, CredentialInfo, ProfileDocument, ProfileSummary, ServiceDocument } from "../domain/Models.js"
import type { StoredHandler } from "../domain/Handlers.js"
import type { RateLimit } from "../domain/Policies.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { CatalogueScope } from "./CatalogueScope.js"

/** Live credentials that expire soon (not yet expired): the metrics' `service_auth_credentials_expiring`. */
export interface ExpiringCounts {
  readonly within7d: number
  readonly within30d: number
}

/** How much the catalogue holds (live credentials only): the metrics' gauges. */
export interface CatalogueCounts {
  readonly profiles: number
  readonly environments: number
  readonly services: number
  readonly credentials: number
}

/** A live credential found by its client id alone (revocation and introspection authenticate with it). */
export interface ClientCredential {
  readonly address: ServiceAddress
  readonly secretHash: string
  /** When it expires (then it authenticates nobody); null: never. */
  readonly expiresAt: Date | null
  /** The profiles whose tokens it may introspect (`introspect_profiles`); null: none. */
  readonly introspectProfiles: ReadonlyArray<ProfileId> | null
}

/** A service with its live credentials: every positive answer the two hot reads can give about it. */
export interface LiveService extends ServiceAddress {
  readonly authType: AuthType
  readonly handler: StoredHandler
  readonly rateLimit: RateLimit | null
  readonly requireDpop: boolean
  readonly upstreamApproved: boolean
  /** The profile's `upstream_origins`; null: none. */
  readonly upstreamOrigins: ReadonlyArray<string> | null
  readonly credentials: ReadonlyArray<{
    readonly clientId: ClientId
    readonly secretHash: string
    readonly lastUsedAt: Date | null
    /** The `jti`s of its tokens its client revoked. */
    readonly revoked: ReadonlyArray<string>
    readonly expiresAt: Date | null
  }>
}

export interface CatalogueQueriesShape {
  readonly ping: Effect.Effect<void, StorageUnavailable>
  readonly countCatalogue: Effect.Effect<CatalogueCounts, StorageUnavailable>
  readonly countExpiring: (now: Date) => Effect.Effect<ExpiringCounts, StorageUnavailable>
  /** The profile's `credential_max_lifetime_days` (null: no policy); none when the profile does not exist. */
  readonly credentialLifetime: (profile: ProfileId) => Effect.Effect<Option.Option<number | null>, StorageUnavailable>
  /** The profile's `upstream_origins` (null: none); none when the profile does not exist. */
  readonly upstreamOrigins: (profile: ProfileId) => Effect.Effect<Option.Option<ReadonlyArray<string> | null>, StorageUnavailable>
  /**
   * The live catalogue as the cache holds it: the services of `scope` (all when undefined) in
   * address order after `after`, at most `limit`, each with its live credentials. The cache loads
   * with it at start and reloads what a write changed.
   */
  readonly liveServices: (
    scope: CatalogueScope | undefined,
    after: ServiceAddress | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<LiveService>, StorageUnavailable>
  readonly listProfiles: Effect.Effect<ReadonlyArray<ProfileSummary>, StorageUnavailable>
  readonly getProfile: (profile: ProfileId) => Effect.Effect<Option.Option<ProfileDocument>, StorageUnavailable>
  readonly getService: (address: ServiceAddress) => Effect.Effect<Option.Option<ServiceDocument>, StorageUnavailable>
  /** The live credential of this client id, wherever it is; None when there is none. */
  readonly findClientCredential: (clientId: ClientId) => Effect.Effect<Option.Option<ClientCredential>, StorageUnavailable>
}

/** A credential's document with its `introspect_profiles`, left out when none (as before the field existed). */
export const withIntrospection = (info: CredentialInfo, profiles: ReadonlyArray<ProfileId> | null): CredentialInfo =>
  profiles === null || profiles.length === 0 ? info : { ...info, introspect_profiles: profiles }

export class CatalogueQueries extends Context.Tag("service-auth/CatalogueQueries")<CatalogueQueries, CatalogueQueriesShape>() {}
