/**
 * The catalogue of profiles, environments and services, and the credentials that protect them.
 * Two implementations serve it: `CredentialRepoSql` (PostgreSQL or embedded PGlite) and
 * `CredentialRepoMemory` (unit tests, embedding), each behind the read cache (`CredentialRepoCache`);
 * `test/CredentialRepo.test.ts` runs one suite against each. The flows see it through narrow
 * services, one per need (`CatalogueServices`).
 *
 * Deleted credentials are kept as tombstones (`deleted_at`), never removed, so that a client id is
 * never reused and a token of a deleted credential can never verify again, even if its service is
 * re-created under the same uuid.
 *
 * Every write takes the admin who makes it and records what it changed in the audit trail
 * (`AuditTrail`) atomically with the change: a write that fails, or changes nothing (a profile that
 * already existed, a deletion of something absent), records nothing.
 */
import { Context, Effect, type Option } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import type { Conflict, CredentialLimitExceeded, NotFound, StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, EnvironmentName, ProfileId } from "../domain/Identifiers.js"
import type { AuthType, CredentialRemoval, GeneratedAddition, ProfileDocument, ProfileSummary, ServiceDocument } from "../domain/Models.js"
import type { StoredHandler } from "../domain/Handlers.js"
import type { RateLimit } from "../domain/Policies.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { CatalogueScope } from "../catalogue/CatalogueScope.js"

export interface ServiceFields {
  readonly name: string
  readonly auth_type: AuthType
  readonly handler: StoredHandler
  /** The per-client rate limit; absent or null: none. */
  readonly rate_limit?: RateLimit | null | undefined
  /** Whether the service accepts only DPoP-bound tokens; absent: false. */
  readonly require_dpop?: boolean | undefined
  /** Whether an admin token set its proxy URL (`UpstreamPolicy`: then not judged); absent: false. */
  readonly upstream_approved?: boolean | undefined
}

/** What one indexed read tells the token endpoint. */
export interface TokenTarget {
  readonly authType: AuthType
  /** The service accepts only DPoP-bound tokens: a request without a proof is refused. Absent: false. */
  readonly requireDpop?: boolean | undefined
  /** The credential with the requested client id, when it is live on this very service. */
  readonly credential: Option.Option<{
    readonly clientId: ClientId
    readonly secretHash: string
    readonly lastUsedAt: Date | null
    /** When it expires (then it is refused as if deleted); null or absent: never. */
    readonly expiresAt?: Date | null | undefined
  }>
}

/** What one indexed read tells the service-call endpoint. */
export interface ServiceRoute {
  readonly authType: AuthType
  readonly handler: StoredHandler
  /** Whether the given client id is a live credential of this service (false when none was given). */
  readonly credentialLive: boolean
  /**
   * The `jti`s of that credential's tokens revoked by its client (`revokeToken`); absent when there
   * are none (the common case: nothing to allocate or compare).
   */
  readonly revokedTokens?: ReadonlySet<string>
  /** When that live credential expires, in epoch milliseconds; null or absent: never. */
  readonly credentialExpiresAt?: number | null | undefined
  /** The service's per-client rate limit; null or absent: none. */
  readonly rateLimit?: RateLimit | null | undefined
  /** The service accepts only DPoP-bound tokens (Bearer ones are refused); absent: false. */
  readonly requireDpop?: boolean | undefined
  /** An admin token set the proxy's URL: not judged by the upstream policy. Absent: false. */
  readonly upstreamApproved?: boolean | undefined
  /** The profile's `upstream_origins`; null or absent: none. */
  readonly upstreamOrigins?: ReadonlyArray<string> | null | undefined
}

/** Live credentials that expire soon (not yet expired): the metrics' `service_auth_credentials_expiring`. */
export interface ExpiringCounts {
  readonly within7d: number
  readonly within30d: number
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

/** A token its client revoked: refused until `expiresAt` (its `exp`), then forgotten. */
export interface TokenRevocation {
  readonly jti: string
  readonly clientId: ClientId
  /** The service the token is for: the scope the revocation evicts from every cache. */
  readonly address: ServiceAddress
  readonly expiresAt: Date
}

/** The revoked `jti`s of a credential as a route carries them: absent when none. */
export const revokedSet = (jtis: ReadonlyArray<string> | null | undefined): ReadonlySet<string> | undefined =>
  jtis === null || jtis === undefined || jtis.length === 0 ? undefined : new Set(jtis)

/** What a save writes: additions with their generated credentials, and removals. */
export type StoredChange = GeneratedAddition | CredentialRemoval

/** How much the catalogue holds (live credentials only): the metrics' gauges. */
export interface CatalogueCounts {
  readonly profiles: number
  readonly environments: number
  readonly services: number
  readonly credentials: number
}

export interface CredentialRepoShape {
  readonly ping: Effect.Effect<void, StorageUnavailable>
  readonly countCatalogue: Effect.Effect<CatalogueCounts, StorageUnavailable>
  readonly countExpiring: (now: Date) => Effect.Effect<ExpiringCounts, StorageUnavailable>
  /**
   * Records `credential.expired` (actor `credential-expiry`, source `server`) for each live credential
   * expired by `now` and not yet recorded: once, whichever instance gets there first (a conditional
   * UPDATE). Answers how many it recorded.
   */
  readonly recordExpiries: (now: Date) => Effect.Effect<number, StorageUnavailable>
  /** The profile's `credential_max_lifetime_days` (null: no policy); none when the profile does not exist. */
  readonly credentialLifetime: (profile: ProfileId) => Effect.Effect<Option.Option<number | null>, StorageUnavailable>
  /** The profile's `upstream_origins` (null: none); none when the profile does not exist. */
  readonly upstreamOrigins: (profile: ProfileId) => Effect.Effect<Option.Option<ReadonlyArray<string> | null>, StorageUnavailable>

  readonly listProfiles: Effect.Effect<ReadonlyArray<ProfileSummary>, StorageUnavailable>
  readonly getProfile: (profile: ProfileId) => Effect.Effect<Option.Option<ProfileDocument>, StorageUnavailable>
  /**
   * Creates the profile unless it exists; `created` tells which. `lifetimeDays` sets its
   * `credential_max_lifetime_days` (null removes it; undefined leaves it as it is), `upstreamOrigins`
   * its `upstream_origins` (normalised; null removes them; undefined leaves them), which every
   * route of the profile carries: setting them evicts the profile's routes from every cache.
   */
  readonly putProfile: (
    profile: ProfileId,
    now: Date,
    actor: AdminActorShape,
    lifetimeDays?: number | null,
    upstreamOrigins?: ReadonlyArray<string> | null
  ) => Effect.Effect<boolean, StorageUnavailable>
  /** Deletes the profile with everything in it and tombstones its credentials. False when absent. */
  readonly deleteProfile: (profile: ProfileId, now: Date, actor: AdminActorShape) => Effect.Effect<boolean, StorageUnavailable>

  readonly putEnvironment: (
    profile: ProfileId,
    environment: EnvironmentName,
    now: Date,
    actor: AdminActorShape
  ) => Effect.Effect<boolean, NotFound | StorageUnavailable>
  readonly deleteEnvironment: (
    profile: ProfileId,
    environment: EnvironmentName,
    now: Date,
    actor: AdminActorShape
  ) => Effect.Effect<boolean, StorageUnavailable>

  readonly getService: (address: ServiceAddress) => Effect.Effect<Option.Option<ServiceDocument>, StorageUnavailable>
  /**
   * Creates the service, or replaces its fields when it exists and `mode` is "upsert".
   * In "create" mode an existing uuid is a `Conflict`. `service.changed` is recorded only when a
   * field actually changed.
   */
  readonly putService: (
    address: ServiceAddress,
    fields: ServiceFields,
    mode: "create" | "upsert",
    now: Date,
    actor: AdminActorShape
  ) => Effect.Effect<boolean, NotFound | Conflict | StorageUnavailable>
  readonly deleteService: (address: ServiceAddress, now: Date, actor: AdminActorShape) => Effect.Effect<boolean, StorageUnavailable>

  /**
   * Applies credential additions and removals of one profile atomically: all or nothing, and never
   * more than two live credentials on a service, whatever runs concurrently. Additions set the
   * service's `auth_type` to `oauth`. Each change is recorded (`credential.added`/`credential.removed`);
   * a `save` of the profile editor (`options.save`) is recorded too, as `profile.saved`.
   */
  readonly applyCredentialChanges: (
    profile: ProfileId,
    changes: ReadonlyArray<StoredChange>,
    now: Date,
    actor: AdminActorShape,
    options?: { readonly save?: boolean }
  ) => Effect.Effect<void, NotFound | CredentialLimitExceeded | StorageUnavailable>

  /**
   * None when the profile, environment or service does not exist. Only a checked client id is looked
   * up: a string that is not one can never name a credential (and must never reach SQL).
   */
  readonly findTokenTarget: (
    address: ServiceAddress,
    clientId: Option.Option<ClientId>
  ) => Effect.Effect<Option.Option<TokenTarget>, StorageUnavailable>
  /**
   * Records a use of the credential at `now` (a token request, a service call): its `last_used_at`
   * becomes the later of the two, whatever the order uses arrive in.
   */
  readonly recordUse: (clientId: ClientId, now: Date) => Effect.Effect<void, StorageUnavailable>
  /**
   * `recordUse` done synchronously: both stores only keep the use in memory (the SQL one writes it
   * later, `LastUsedWrites`), which lets the hot paths record it without Effect.
   */
  readonly recordUseSync: (clientId: ClientId, now: Date) => void

  /** The live credential of this client id, wherever it is; None when there is none. */
  readonly findClientCredential: (clientId: ClientId) => Effect.Effect<Option.Option<ClientCredential>, StorageUnavailable>
  /**
   * Sets the profiles whose tokens the live credential `clientId` of the service may introspect
   * (sorted, each once; null or empty: none), with its audit event `credential.changed` when the
   * list changed. None when the service has no such live credential; else whether it changed.
   */
  readonly setIntrospectProfiles: (
    address: ServiceAddress,
    clientId: ClientId,
    profiles: ReadonlyArray<ProfileId> | null,
    now: Date,
    actor: AdminActorShape
  ) => Effect.Effect<Option.Option<boolean>, StorageUnavailable>
  /**
   * Records a token its client revoked (and forgets revocations expired by `now`), with its audit
   * event `token.revoked`; a catalogue write of the token's service, so that every instance refuses
   * the token from its next request on. False when it was already revoked.
   */
  readonly revokeToken: (
    revocation: TokenRevocation,
    now: Date,
    actor: AdminActorShape
  ) => Effect.Effect<boolean, StorageUnavailable>

  /** None when the profile, environment or service does not exist. */
  readonly findServiceRoute: (
    address: ServiceAddress,
    clientId: Option.Option<ClientId>
  ) => Effect.Effect<Option.Option<ServiceRoute>, StorageUnavailable>

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

/**
 * The store behind its read cache (`CredentialRepoCache`): every operation of the store, writes
 * evicting what they change, and the two hot reads answered from memory when held (`peek`).
 */
export interface CachedCatalogue extends CredentialRepoShape {
  readonly peek: CataloguePeek
  /**
   * After a committed change that the catalogue's scopes cannot name and that announced itself as
   * "anything" (an admin token revoked, `AdminTokenStore.revoke`): drops this instance's cache (a new
   * `epoch`), then returns once every other instance has dropped its own.
   */
  readonly dropCached: Effect.Effect<void>
}

/** The answers of the two hot reads the cache holds, read synchronously: undefined when not held. */
export interface CataloguePeek {
  readonly tokenTarget: (address: ServiceAddress, clientId: Option.Option<ClientId>) => Option.Option<TokenTarget> | undefined
  readonly serviceRoute: (address: ServiceAddress, clientId: Option.Option<ClientId>) => Option.Option<ServiceRoute> | undefined
  /**
   * The cache's generation while its answers may be used, undefined while not. What another cache
   * keeps beside this one (introspection's callers) is valid only in the generation it was read
   * in: it is dropped with everything when `dropCached` runs here or on any other instance.
   */
  readonly epoch: () => number | undefined
}

/**
 * The whole cached store, as one service. No server module depends on it: each flow depends on the
 * narrow service it uses (`CatalogueLookup`, `CatalogueWrites`, `CatalogueQueries`, `UsageRecord`).
 * It stays because the repository suite (`test/CredentialRepo.test.ts`) and the cache's tests run
 * every operation against each storage through one interface.
 */
export class CredentialRepo extends Context.Tag("service-auth/CredentialRepo")<CredentialRepo, CachedCatalogue>() {}
