/**
 * The hot read, as the token endpoint and the service call need it (fosite gives each flow the
 * storage interface it needs): what a service is and whether a credential of it is live. The
 * synchronous lookups answer from the cached catalogue, undefined when it does not hold the answer;
 * then the `find…` read is made in Effect (one indexed read, whose answer the cache keeps).
 */
import { Context, type Effect, type Option } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import type { ClientId } from "../domain/Identifiers.js"
import type { AuthType } from "../domain/Models.js"
import type { StoredHandler } from "../domain/Handlers.js"
import type { RateLimit } from "../domain/Policies.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"

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

/** The revoked `jti`s of a credential as a route carries them: absent when none. */
export const revokedSet = (jtis: ReadonlyArray<string> | null | undefined): ReadonlySet<string> | undefined =>
  jtis === null || jtis === undefined || jtis.length === 0 ? undefined : new Set(jtis)

/** The two hot reads as a store answers them (SQL or memory), each one indexed read. */
export interface CatalogueReads {
  /**
   * None when the profile, environment or service does not exist. Only a checked client id is looked
   * up: a string that is not one can never name a credential (and must never reach SQL).
   */
  readonly findTokenTarget: (
    address: ServiceAddress,
    clientId: Option.Option<ClientId>
  ) => Effect.Effect<Option.Option<TokenTarget>, StorageUnavailable>
  /** None when the profile, environment or service does not exist. */
  readonly findServiceRoute: (
    address: ServiceAddress,
    clientId: Option.Option<ClientId>
  ) => Effect.Effect<Option.Option<ServiceRoute>, StorageUnavailable>
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

export interface CatalogueLookupShape extends CatalogueReads, CataloguePeek {}

export class CatalogueLookup extends Context.Tag("service-auth/CatalogueLookup")<CatalogueLookup, CatalogueLookupShape>() {}
