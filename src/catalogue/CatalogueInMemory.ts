/**
 * The catalogue in memory, for unit tests and embedding: each flow's part over one set of maps,
 * served behind the same read cache as the SQL store (`Storage.layerMemory`), so that tests run
 * production's cached path. Every operation is one synchronous step, so each is atomic under
 * Effect's cooperative scheduling, like a transaction; its audit events are appended in that same
 * step, to the log of the `AuditTrail` made with it.
 */
import { Effect, Either, Option } from "effect"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, NotFound } from "../domain/Errors.js"
import type { ClientId, EnvironmentName, ProfileId } from "../domain/Identifiers.js"
import { laterUse } from "../domain/LastUse.js"
import { type CredentialInfo, type ServiceDocument, withPublicKey } from "../domain/Models.js"
import { answeredHandler } from "../domain/Handlers.js"
import { compareAddresses, type ServiceAddress } from "../domain/ServiceAddress.js"
import { covers } from "./CatalogueScope.js"
import type { CatalogueStore } from "./CredentialRepoCache.js"
import * as Events from "../storage/AuditTrail.js"
import { type CatalogueReads, revokedSet } from "./CatalogueLookup.js"
import { type CatalogueQueriesShape, type LiveService, withIntrospection } from "./CatalogueQueries.js"
import { type CatalogueStoreWrites, checkCredentialChanges, introspectProfilesOf, serviceKey } from "./CatalogueWrites.js"
import type { LastUseShape } from "./LastUse.js"
import { byName, sameFields, type StoredCredential, type StoredProfile, type StoredService } from "./CatalogueInMemoryRecords.js"

/** The store and the audit trail it records its changes in. */
export const make = Effect.sync(() => {
  const log = Events.makeMemoryLog()
  const profiles = new Map<ProfileId, StoredProfile>()
  const credentials = new Map<string, StoredCredential>()
  /** Revoked tokens by `jti`: their client id and when they expire. */
  const revoked = new Map<string, { readonly clientId: ClientId; readonly expiresAt: Date }>()
  let sequence = 0

  const environmentOf = (profile: ProfileId, environment: EnvironmentName) => profiles.get(profile)?.environments.get(environment)
  const serviceOf = (address: ServiceAddress) => environmentOf(address.profile, address.environment)?.services.get(address.uuid)

  const liveCredentialsOf = (address: ServiceAddress) =>
    [...credentials.values()]
      .filter((c) =>
        c.deletedAt === null && c.profile === address.profile && c.environment === address.environment &&
        c.serviceUuid === address.uuid
      )
      .sort((a, b) => a.order - b.order)

  const liveCredential = (address: ServiceAddress, clientId: string) => {
    const credential = credentials.get(clientId)
    return credential !== undefined && credential.deletedAt === null && credential.profile === address.profile &&
        credential.environment === address.environment && credential.serviceUuid === address.uuid
      ? credential
      : undefined
  }

  /** Tombstones the live credentials that match; answers them, for the audit trail. */
  const tombstone = (now: Date, matches: (c: StoredCredential) => boolean) => {
    const removed: Array<Events.RemovedCredential> = []
    for (const credential of credentials.values()) {
      if (credential.deletedAt === null && matches(credential)) {
        credential.deletedAt = now
        removed.push({ environment: credential.environment, service_uuid: credential.serviceUuid, client_id: credential.clientId })
      }
    }
    return removed.sort((a, b) => (a.client_id < b.client_id ? -1 : 1))
  }

  const serviceDocument = (address: ServiceAddress, service: StoredService): ServiceDocument => ({
    uuid: service.uuid,
    name: service.name,
    auth_type: service.auth_type,
    handler: answeredHandler(service.handler),
    ...(service.rate_limit == null ? {} : { rate_limit: service.rate_limit }),
    ...(service.require_dpop === true ? { require_dpop: true } : {}),
    credentials: liveCredentialsOf(address).map((c): CredentialInfo =>
      withIntrospection(
        withPublicKey(
          { client_id: c.clientId, created_at: c.createdAt, expires_at: c.expiresAt, last_used_at: c.lastUsedAt },
          c.secretHash
        ),
        c.introspectProfiles
      )
    )
  })

  const recordUseSync = (clientId: ClientId, now: Date) => {
    const credential = credentials.get(clientId)
    if (credential !== undefined) credential.lastUsedAt = laterUse(credential.lastUsedAt, now)
  }

  /** A service with its live credentials, as the cache loads it (`liveServices`). */
  const liveService = (address: ServiceAddress, service: StoredService): LiveService => ({
    ...address,
    authType: service.auth_type,
    handler: service.handler,
    rateLimit: service.rate_limit ?? null,
    requireDpop: service.require_dpop === true,
    upstreamApproved: service.upstream_approved === true,
    upstreamOrigins: profiles.get(address.profile)?.upstreamOrigins ?? null,
    credentials: liveCredentialsOf(address).map((c) => ({
      clientId: c.clientId,
      secretHash: c.secretHash,
      lastUsedAt: c.lastUsedAt,
      revoked: [...revoked].filter(([, token]) => token.clientId === c.clientId).map(([jti]) => jti),
      expiresAt: c.expiresAt
    }))
  })

  const DAY_MS = 86_400_000
  const reads: CatalogueReads = {
    findTokenTarget: (address, clientId) =>
      Effect.sync(() =>
        Option.fromNullable(serviceOf(address)).pipe(Option.map((service) => ({
          authType: service.auth_type,
          requireDpop: service.require_dpop === true,
          credential: Option.flatMapNullable(clientId, (id) => liveCredential(address, id)).pipe(
            Option.map((c) => ({ clientId: c.clientId, secretHash: c.secretHash, lastUsedAt: c.lastUsedAt, expiresAt: c.expiresAt }))
          )
        })))
      ),
    findServiceRoute: (address, clientId) =>
      Effect.sync(() =>
        Option.fromNullable(serviceOf(address)).pipe(Option.map((service) => {
          const revokedTokens = Option.isNone(clientId)
            ? undefined
            : revokedSet([...revoked].filter(([, token]) => token.clientId === clientId.value).map(([jti]) => jti))
          const credential = Option.isSome(clientId) ? liveCredential(address, clientId.value) : undefined
          return {
            authType: service.auth_type,
            handler: service.handler,
            credentialLive: credential !== undefined,
            credentialExpiresAt: credential?.expiresAt?.getTime() ?? null,
            rateLimit: service.rate_limit ?? null,
            requireDpop: service.require_dpop === true,
            upstreamApproved: service.upstream_approved === true,
            upstreamOrigins: profiles.get(address.profile)?.upstreamOrigins ?? null,
            ...(revokedTokens === undefined ? {} : { revokedTokens })
          }
        }))
      )
  }

  const queries: CatalogueQueriesShape = {
    ping: Effect.void,
    countExpiring: (now) =>
      Effect.sync(() => {
        const expiring = (days: number) =>
          [...credentials.values()].filter((c) =>
            c.deletedAt === null && c.expiresAt !== null && c.expiresAt > now &&
            c.expiresAt.getTime() <= now.getTime() + days * DAY_MS
          ).length
        return { within7d: expiring(7), within30d: expiring(30) }
      }),
    credentialLifetime: (profile) =>
      Effect.sync(() => Option.map(Option.fromNullable(profiles.get(profile)), (stored) => stored.lifetimeDays)),
    upstreamOrigins: (profile) =>
      Effect.sync(() => Option.map(Option.fromNullable(profiles.get(profile)), (stored) => stored.upstreamOrigins)),
    countCatalogue: Effect.sync(() => {
      const environments = [...profiles.values()].flatMap((profile) => [...profile.environments.values()])
      return {
        profiles: profiles.size,
        environments: environments.length,
        services: environments.reduce((total, environment) => total + environment.services.size, 0),
        credentials: [...credentials.values()].filter((credential) => credential.deletedAt === null).length
      }
    }),
    listProfiles: Effect.sync(() =>
      [...profiles.entries()].sort(byName).map(([profile, stored]) => ({ profile, created_at: stored.createdAt }))
    ),
    getProfile: (profile) =>
      Effect.sync(() =>
        Option.fromNullable(profiles.get(profile)).pipe(Option.map((stored) => ({
          profile,
          created_at: stored.createdAt,
          ...(stored.lifetimeDays === null ? {} : { credential_max_lifetime_days: stored.lifetimeDays }),
          ...(stored.upstreamOrigins === null ? {} : { upstream_origins: stored.upstreamOrigins }),
          environments: [...stored.environments.entries()].sort(byName).map(([name, environment]) => ({
            name,
            services: [...environment.services.values()]
              .sort((a, b) => a.order - b.order)
              .map((service) => serviceDocument({ profile, environment: name, uuid: service.uuid }, service))
          }))
        })))
      ),
    getService: (address) =>
      Effect.sync(() => Option.fromNullable(serviceOf(address)).pipe(Option.map((service) => serviceDocument(address, service)))),
    liveServices: (scope, after, limit) =>
      Effect.sync(() =>
        [...profiles].flatMap(([profile, stored]) =>
          [...stored.environments].flatMap(([environment, { services }]) =>
            [...services.values()].map((service) => ({ address: { profile, environment, uuid: service.uuid }, service }))
          )
        )
          .filter(({ address: a }) =>
            (scope === undefined || covers(scope, a.profile, a.environment, a.uuid)) &&
            (after === undefined || compareAddresses(after, a) < 0)
          )
          .sort((a, b) => compareAddresses(a.address, b.address))
          .slice(0, limit)
          .map(({ address, service }) => liveService(address, service))
      ),
    findClientCredential: (clientId) =>
      Effect.sync(() => {
        const credential = credentials.get(clientId)
        return credential === undefined || credential.deletedAt !== null
          ? Option.none()
          : Option.some({
            address: { profile: credential.profile, environment: credential.environment, uuid: credential.serviceUuid },
            secretHash: credential.secretHash,
            expiresAt: credential.expiresAt,
            introspectProfiles: credential.introspectProfiles
          })
      })
  }

  const writes: CatalogueStoreWrites = {
    recordExpiries: (now) =>
      Effect.sync(() => {
        const expired = [...credentials.values()].filter((c) =>
          c.deletedAt === null && c.expiresAt !== null && c.expiresAt <= now && !c.expiryRecorded
        )
        for (const credential of expired) credential.expiryRecorded = true
        log.append(Events.expiryEvents(
          now,
          expired.map((c) => ({
            profile: c.profile,
            environment: c.environment,
            service_uuid: c.serviceUuid,
            client_id: c.clientId,
            expires_at: c.expiresAt!
          }))
        ))
        return expired.length
      }),
    putProfile: (profile, now, actor, lifetimeDays, upstreamOrigins) =>
      Effect.sync(() => {
        const existing = profiles.get(profile)
        if (existing === undefined) {
          profiles.set(profile, {
            createdAt: now,
            lifetimeDays: lifetimeDays ?? null,
            upstreamOrigins: upstreamOrigins ?? null,
            environments: new Map()
          })
          log.append([Events.profileEvent(actor, now, "profile.created", profile, lifetimeDays, upstreamOrigins)])
          return true
        }
        const lifetime = lifetimeDays !== undefined && existing.lifetimeDays !== lifetimeDays ? lifetimeDays : undefined
        const origins = upstreamOrigins !== undefined && JSON.stringify(existing.upstreamOrigins) !== JSON.stringify(upstreamOrigins)
          ? upstreamOrigins
          : undefined
        if (lifetime === undefined && origins === undefined) return false
        Object.assign(
          existing,
          lifetime === undefined ? {} : { lifetimeDays: lifetime },
          origins === undefined ? {} : { upstreamOrigins: origins }
        )
        log.append([Events.profileEvent(actor, now, "profile.changed", profile, lifetime, origins)])
        return false
      }),
    deleteProfile: (profile, now, actor) =>
      Effect.sync(() => {
        if (!profiles.delete(profile)) return false
        const removed = tombstone(now, (c) => c.profile === profile)
        log.append(Events.deletionEvents(actor, now, { action: "profile.deleted", profile }, removed))
        return true
      }),
    putEnvironment: (profile, environment, now, actor) =>
      Effect.suspend(() => {
        const stored = profiles.get(profile)
        if (stored === undefined) return Effect.fail(new NotFound({ description: "Profile not found" }))
        if (stored.environments.has(environment)) return Effect.succeed(false)
        stored.environments.set(environment, { createdAt: now, services: new Map() })
        log.append([auditEvent(actor, now, { action: "environment.created", profile, environment })])
        return Effect.succeed(true)
      }),
    deleteEnvironment: (profile, environment, now, actor) =>
      Effect.sync(() => {
        if (!profiles.get(profile)?.environments.delete(environment)) return false
        const removed = tombstone(now, (c) => c.profile === profile && c.environment === environment)
        log.append(Events.deletionEvents(actor, now, { action: "environment.deleted", profile, environment }, removed))
        return true
      }),
    putService: (address, fields, mode, now, actor) =>
      Effect.suspend((): Effect.Effect<boolean, NotFound | Conflict> => {
        const profile = profiles.get(address.profile)
        if (profile === undefined) return Effect.fail(new NotFound({ description: "Profile not found" }))
        const environment = profile.environments.get(address.environment)
        if (environment === undefined) return Effect.fail(new NotFound({ description: "Environment not found" }))
        const existing = environment.services.get(address.uuid)
        if (existing !== undefined && mode === "create") {
          return Effect.fail(new Conflict({ description: "A service with this uuid already exists" }))
        }
        environment.services.set(address.uuid, {
          ...fields,
          uuid: address.uuid,
          createdAt: existing?.createdAt ?? now,
          order: existing?.order ?? sequence++
        })
        if (existing === undefined) log.append([Events.serviceEvent(actor, now, "service.created", address, fields)])
        else if (!sameFields(existing, fields)) log.append([Events.serviceEvent(actor, now, "service.changed", address, fields)])
        return Effect.succeed(existing === undefined)
      }),
    deleteService: (address, now, actor) =>
      Effect.sync(() => {
        if (!environmentOf(address.profile, address.environment)?.services.delete(address.uuid)) return false
        const removed = tombstone(now, (c) =>
          c.profile === address.profile && c.environment === address.environment && c.serviceUuid === address.uuid)
        const { environment, profile, uuid: service_uuid } = address
        log.append(Events.deletionEvents(actor, now, { action: "service.deleted", profile, environment, service_uuid }, removed))
        return true
      }),
    applyCredentialChanges: (profile, changes, now, actor, options) =>
      Effect.suspend(() => {
        if (!profiles.has(profile)) return Effect.fail(new NotFound({ description: "Profile not found" }))
        const snapshot = new Map<string, ReadonlyArray<string> | undefined>()
        for (const change of changes) {
          const address = { profile, environment: change.environment, uuid: change.service_uuid }
          snapshot.set(
            serviceKey(change.environment, change.service_uuid),
            serviceOf(address) === undefined ? undefined : liveCredentialsOf(address).map((c) => c.clientId)
          )
        }
        const checked = checkCredentialChanges(snapshot, changes)
        if (Either.isLeft(checked)) return Effect.fail(checked.left)
        // Like the SQL primary key: a client id, live or tombstoned, is never reused.
        const added = changes.flatMap((c) => (c.op === "add_credential" ? [c.client_id] : []))
        const reused = added.find((id, index) => credentials.has(id) || added.indexOf(id) !== index)
        if (reused !== undefined) return Effect.die(new Error(`client id ${reused} already exists`))
        for (const change of changes) {
          if (change.op === "remove_credential") {
            credentials.get(change.client_id)!.deletedAt = now
            continue
          }
          const environment = environmentOf(profile, change.environment)!
          const service = environment.services.get(change.service_uuid)!
          environment.services.set(change.service_uuid, { ...service, auth_type: "oauth" })
          credentials.set(change.client_id, {
            clientId: change.client_id,
            profile,
            environment: change.environment,
            serviceUuid: change.service_uuid,
            secretHash: change.secret_hash,
            createdAt: now,
            order: sequence++,
            expiresAt: change.expires_at ?? null,
            lastUsedAt: null,
            deletedAt: null,
            expiryRecorded: false,
            introspectProfiles: null
          })
        }
        log.append(Events.credentialEvents(actor, now, profile, changes, options?.save === true))
        return Effect.void
      }),
    setIntrospectProfiles: (address, clientId, profiles, now, actor) =>
      Effect.sync(() => {
        const credential = liveCredential(address, clientId)
        if (credential === undefined) return Option.none()
        const next = introspectProfilesOf(profiles)
        // The same list changes nothing and records nothing (SQL's jsonb compares by value).
        if (JSON.stringify(credential.introspectProfiles ?? []) === JSON.stringify(next ?? [])) return Option.some(false)
        credential.introspectProfiles = next
        log.append([Events.introspectionEvent(actor, now, address, clientId, next)])
        return Option.some(true)
      }),
    revokeToken: (revocation, now, actor) =>
      Effect.sync(() => {
        for (const [jti, token] of revoked) if (token.expiresAt <= now) revoked.delete(jti)
        if (revoked.has(revocation.jti)) return false
        revoked.set(revocation.jti, { clientId: revocation.clientId, expiresAt: revocation.expiresAt })
        log.append([Events.revocationEvent(actor, now, revocation)])
        return true
      })
  }

  const lastUse: LastUseShape = {
    recordUse: (clientId, now) => Effect.sync(() => recordUseSync(clientId, now)),
    recordUseSync
  }

  const store: CatalogueStore = { reads, queries, writes, lastUse }
  return { store, auditTrail: log.trail }
})
