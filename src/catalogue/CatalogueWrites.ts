/**
 * The catalogue's writes: what the admin API, the credential manager, the revocation endpoint and
 * the expiry sweep change. Each records its audit event with the change, atomically with it (a
 * write that fails, or changes nothing, records nothing), and evicts from every instance's cache
 * what it changed before it returns.
 *
 * Deleted credentials are kept as tombstones (`deleted_at`), never removed, so that a client id is
 * never reused and a token of a deleted credential can never verify again, even if its service is
 * re-created under the same uuid.
 */
import { Context, type Effect, Either, type Option } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { type Conflict, CredentialLimitExceeded, NotFound, type StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { MAX_CREDENTIALS } from "../domain/Limits.js"
import type { AuthType, CredentialRemoval, GeneratedAddition } from "../domain/Models.js"
import type { StoredHandler } from "../domain/Handlers.js"
import type { RateLimit } from "../domain/Policies.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"

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

/** A token its client revoked: refused until `expiresAt` (its `exp`), then forgotten. */
export interface TokenRevocation {
  readonly jti: string
  readonly clientId: ClientId
  /** The service the token is for: the scope the revocation evicts from every cache. */
  readonly address: ServiceAddress
  readonly expiresAt: Date
}

/** What a save writes: additions with their generated credentials, and removals. */
export type StoredChange = GeneratedAddition | CredentialRemoval

/** The writes as a store makes them (SQL or memory); the cache evicts around them. */
export interface CatalogueStoreWrites {
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
  readonly revokeToken: (revocation: TokenRevocation, now: Date, actor: AdminActorShape) => Effect.Effect<boolean, StorageUnavailable>
  /**
   * Records `credential.expired` (actor `credential-expiry`, source `server`) for each live credential
   * expired by `now` and not yet recorded: once, whichever instance gets there first (a conditional
   * UPDATE). Answers how many it recorded.
   */
  readonly recordExpiries: (now: Date) => Effect.Effect<number, StorageUnavailable>
}

export interface CatalogueWritesShape extends CatalogueStoreWrites {
  /**
   * After a committed change that the catalogue's scopes cannot name and that announced itself as
   * "anything" (an admin token revoked, `AdminTokenStore.revoke`): drops this instance's cache (a new
   * `epoch`), then returns once every other instance has dropped its own.
   */
  readonly dropCached: Effect.Effect<void>
}

/** The profiles a credential may introspect as stored: sorted, each once; an empty list is none (null). */
export const introspectProfilesOf = (profiles: ReadonlyArray<ProfileId> | null | undefined): ReadonlyArray<ProfileId> | null =>
  profiles == null || profiles.length === 0 ? null : [...new Set(profiles)].sort()

export class CatalogueWrites extends Context.Tag("service-auth/CatalogueWrites")<CatalogueWrites, CatalogueWritesShape>() {}

/** A touched service as read under lock: its live client ids, or undefined when it does not exist. */
export type ServiceSnapshot = ReadonlyMap<string, ReadonlyArray<string> | undefined>

export const serviceKey = (environment: EnvironmentName, uuid: ServiceUuid): string => `${environment}\u0000${uuid}`

/**
 * The rules of a profile save, as one pure function both stores call after they have locked and
 * read the services a save touches: every service must exist, every removal must name a live
 * credential of its service, and no service may end with more than two live credentials.
 */
export const checkCredentialChanges = (
  snapshot: ServiceSnapshot,
  changes: ReadonlyArray<StoredChange>
): Either.Either<void, NotFound | CredentialLimitExceeded> => {
  const live = new Map<string, Set<string>>()
  for (const change of changes) {
    const key = serviceKey(change.environment, change.service_uuid)
    const existing = snapshot.get(key)
    if (existing === undefined) {
      return Either.left(
        new NotFound({
          description: `Service ${change.service_uuid} not found in environment ${change.environment}`
        })
      )
    }
    if (!live.has(key)) live.set(key, new Set(existing))
  }
  for (const change of changes) {
    if (change.op !== "remove_credential") continue
    const ids = live.get(serviceKey(change.environment, change.service_uuid))!
    if (!ids.delete(change.client_id)) {
      return Either.left(
        new NotFound({ description: `Credential ${change.client_id} is not a live credential of service ${change.service_uuid}` })
      )
    }
  }
  for (const change of changes) {
    if (change.op !== "add_credential") continue
    const ids = live.get(serviceKey(change.environment, change.service_uuid))!
    ids.add(change.client_id)
    if (ids.size > MAX_CREDENTIALS) {
      return Either.left(
        new CredentialLimitExceeded({
          description: `Service ${change.service_uuid} would hold more than ${MAX_CREDENTIALS} credentials; remove one first`
        })
      )
    }
  }
  return Either.right(undefined)
}
