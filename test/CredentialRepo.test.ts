/**
 * One suite for `CredentialRepo`, run against every storage layer: the in-memory store, embedded
 * PGlite and PostgreSQL. Whatever a method promises, all three must keep.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, type Layer, Option, Schedule } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import type { StoredHandler as ServiceHandlerConfig } from "../src/domain/Handlers.js"
import { CredentialRepo, type StoredChange } from "../src/storage/CredentialRepo.js"
import { type ServiceAddress } from "../src/domain/ServiceAddress.js"
import { describeWithPostgres, embeddedStorage, isolatedPostgresStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { TEST_ACTOR, uniqueName } from "../src/testing.js"

const T0 = new Date("2026-01-01T00:00:00.000Z")
const T1 = new Date("2026-01-02T03:04:05.678Z")
const T2 = new Date("2026-02-03T10:20:30.456Z")
const T3 = new Date("2026-03-04T11:22:33.789Z")

const PRODUCTION = "production" as EnvironmentName
const STAGING = "staging" as EnvironmentName
const ECHO: ServiceHandlerConfig = { type: "echo" }
const PROXY: ServiceHandlerConfig = { type: "proxy", url: "https://upstream.example.test/api" }

const newProfile = () => uniqueName("repo") as ProfileId
const newUuid = () => randomUUID() as ServiceUuid
const newClientId = () => `svc_${randomBytes(16).toString("hex")}` as ClientId
const hashOf = (clientId: ClientId) => `hash-of-${clientId}`

const add = (environment: EnvironmentName, serviceUuid: ServiceUuid, clientId: ClientId): StoredChange => ({
  op: "add_credential",
  environment,
  service_uuid: serviceUuid,
  client_id: clientId,
  secret_hash: hashOf(clientId)
})
const remove = (environment: EnvironmentName, serviceUuid: ServiceUuid, clientId: ClientId): StoredChange => ({
  op: "remove_credential",
  environment,
  service_uuid: serviceUuid,
  client_id: clientId
})

/** A fresh profile with one environment and one service (no credentials). */
const givenService = (options: {
  readonly environment?: EnvironmentName
  readonly authType?: "oauth" | "none"
  readonly handler?: ServiceHandlerConfig
} = {}) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const address: ServiceAddress = {
      profile: newProfile(),
      environment: options.environment ?? PRODUCTION,
      uuid: newUuid()
    }
    yield* repo.putProfile(address.profile, T0, TEST_ACTOR)
    yield* repo.putEnvironment(address.profile, address.environment, T0, TEST_ACTOR)
    yield* repo.putService(
      address,
      { name: "billing", auth_type: options.authType ?? "oauth", handler: options.handler ?? ECHO },
      "create",
      T0, TEST_ACTOR
    )
    return address
  })

/** Adds a service to an existing profile and environment. */
const givenSibling = (address: ServiceAddress, environment: EnvironmentName = address.environment) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const sibling: ServiceAddress = { profile: address.profile, environment, uuid: newUuid() }
    yield* repo.putEnvironment(address.profile, environment, T0, TEST_ACTOR)
    yield* repo.putService(sibling, { name: "sibling", auth_type: "oauth", handler: ECHO }, "create", T0, TEST_ACTOR)
    return sibling
  })

/** Adds credentials to a service, one change set, and returns their ids. */
const givenCredentials = (address: ServiceAddress, count: number, now: Date = T1) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const ids = Array.from({ length: count }, newClientId)
    yield* repo.applyCredentialChanges(address.profile, ids.map((id) => add(address.environment, address.uuid, id)), now, TEST_ACTOR)
    return ids
  })

const liveClientIds = (address: ServiceAddress) =>
  Effect.flatMap(CredentialRepo, (repo) => repo.getService(address)).pipe(
    Effect.map((service) => Option.getOrThrow(service).credentials.map((c) => c.client_id))
  )

/** Whether `clientId` is live on `address`, as the token endpoint and the service endpoint see it. */
const liveness = (address: ServiceAddress, clientId: ClientId) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const target = yield* repo.findTokenTarget(address, Option.some(clientId))
    const route = yield* repo.findServiceRoute(address, Option.some(clientId))
    return {
      token: Option.isSome(Option.flatMap(target, (t) => t.credential)),
      route: Option.match(route, { onNone: () => false, onSome: (r) => r.credentialLive })
    }
  })

const repoSuite = (name: string, storage: Layer.Layer<CredentialRepo, unknown>) =>
  layer(storage, { excludeTestServices: true })(name, (it) => {
    describe("profiles", () => {
      it.effect("putProfile creates once, then reports the profile existed and keeps its creation time", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const profile = newProfile()
          expect(yield* repo.putProfile(profile, T0, TEST_ACTOR)).toBe(true)
          expect(yield* repo.putProfile(profile, T1, TEST_ACTOR)).toBe(false)
          const document = Option.getOrThrow(yield* repo.getProfile(profile))
          expect(document.profile).toBe(profile)
          expect(document.created_at.getTime()).toBe(T0.getTime())
          expect(document.environments).toEqual([])
        }))

      it.effect("getProfile is none for an unknown profile", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          expect(Option.isNone(yield* repo.getProfile(newProfile()))).toBe(true)
        }))

      it.effect("listProfiles contains a created profile with its creation time", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const profile = newProfile()
          yield* repo.putProfile(profile, T1, TEST_ACTOR)
          const listed = (yield* repo.listProfiles).filter((p) => p.profile === profile)
          expect(listed).toHaveLength(1)
          expect(listed[0]!.created_at.getTime()).toBe(T1.getTime())
        }))

      it.effect("getProfile nests environments, services and credentials in order", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const profile = newProfile()
          yield* repo.putProfile(profile, T0, TEST_ACTOR)
          // Created out of name order: environments come back by name.
          expect(yield* repo.putEnvironment(profile, STAGING, T0, TEST_ACTOR)).toBe(true)
          expect(yield* repo.putEnvironment(profile, PRODUCTION, T0, TEST_ACTOR)).toBe(true)
          // Services and credentials come back in creation order, whatever their ids' order.
          const [firstUuid, secondUuid] = [newUuid(), newUuid()].sort().reverse() as [ServiceUuid, ServiceUuid]
          const first: ServiceAddress = { profile, environment: PRODUCTION, uuid: firstUuid }
          const second: ServiceAddress = { profile, environment: PRODUCTION, uuid: secondUuid }
          yield* repo.putService(first, { name: "first", auth_type: "oauth", handler: PROXY }, "create", T0, TEST_ACTOR)
          yield* repo.putService(second, { name: "second", auth_type: "none", handler: ECHO }, "create", T0, TEST_ACTOR)
          const [olderId, newerId] = [newClientId(), newClientId()].sort().reverse() as [ClientId, ClientId]
          yield* repo.applyCredentialChanges(profile, [add(PRODUCTION, firstUuid, olderId)], T1, TEST_ACTOR)
          yield* repo.applyCredentialChanges(profile, [add(PRODUCTION, firstUuid, newerId)], T2, TEST_ACTOR)

          const document = Option.getOrThrow(yield* repo.getProfile(profile))
          expect(document).toEqual({
            profile,
            created_at: T0,
            environments: [
              {
                name: PRODUCTION,
                services: [
                  {
                    uuid: firstUuid,
                    name: "first",
                    auth_type: "oauth",
                    handler: PROXY,
                    credentials: [
                      { client_id: olderId, created_at: T1, expires_at: null, last_used_at: null },
                      { client_id: newerId, created_at: T2, expires_at: null, last_used_at: null }
                    ]
                  },
                  { uuid: secondUuid, name: "second", auth_type: "none", handler: ECHO, credentials: [] }
                ]
              },
              { name: STAGING, services: [] }
            ]
          })
          const credentials = document.environments[0]!.services[0]!.credentials
          expect(credentials.map((c) => c.created_at.getTime())).toEqual([T1.getTime(), T2.getTime()])
        }))
    })

    describe("environments", () => {
      it.effect("putEnvironment creates once, then reports the environment existed", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const profile = newProfile()
          yield* repo.putProfile(profile, T0, TEST_ACTOR)
          expect(yield* repo.putEnvironment(profile, PRODUCTION, T0, TEST_ACTOR)).toBe(true)
          expect(yield* repo.putEnvironment(profile, PRODUCTION, T1, TEST_ACTOR)).toBe(false)
          const document = Option.getOrThrow(yield* repo.getProfile(profile))
          expect(document.environments.map((e) => e.name)).toEqual([PRODUCTION])
        }))

      it.effect("putEnvironment on a missing profile fails with NotFound", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const profile = newProfile()
          const error = yield* Effect.flip(repo.putEnvironment(profile, PRODUCTION, T0, TEST_ACTOR))
          expect(error._tag).toBe("NotFound")
          expect(Option.isNone(yield* repo.getProfile(profile))).toBe(true)
        }))
    })

    describe("services", () => {
      it.effect("putService in create mode creates, then refuses an existing uuid with Conflict", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ handler: PROXY })
          const error = yield* Effect.flip(
            repo.putService(address, { name: "other", auth_type: "none", handler: ECHO }, "create", T1, TEST_ACTOR)
          )
          expect(error._tag).toBe("Conflict")
          const service = Option.getOrThrow(yield* repo.getService(address))
          expect(service).toEqual({ uuid: address.uuid, name: "billing", auth_type: "oauth", handler: PROXY, credentials: [] })
        }))

      it.effect("putService in upsert mode replaces the fields of an existing service and answers false", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [clientId] = yield* givenCredentials(address, 1)
          const created = yield* repo.putService(address, { name: "renamed", auth_type: "none", handler: PROXY }, "upsert", T1, TEST_ACTOR)
          expect(created).toBe(false)
          const service = Option.getOrThrow(yield* repo.getService(address))
          expect(service.name).toBe("renamed")
          expect(service.auth_type).toBe("none")
          expect(service.handler).toEqual(PROXY)
          // Replacing the fields keeps the credentials.
          expect(service.credentials.map((c) => c.client_id)).toEqual([clientId])
        }))

      it.effect("require_dpop: stored, shown only when set, read by both hot reads, replaced by an upsert", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [clientId] = yield* givenCredentials(address, 1)
          const hotReads = Effect.gen(function*() {
            const target = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(clientId!)))
            const route = Option.getOrThrow(yield* repo.findServiceRoute(address, Option.some(clientId!)))
            return { token: target.requireDpop === true, route: route.requireDpop === true }
          })
          expect(Object.keys(Option.getOrThrow(yield* repo.getService(address)))).not.toContain("require_dpop")
          expect(yield* hotReads).toEqual({ token: false, route: false })
          const fields = { name: "billing", auth_type: "oauth", handler: ECHO, require_dpop: true } as const
          expect(yield* repo.putService(address, fields, "upsert", T1, TEST_ACTOR)).toBe(false)
          expect(Option.getOrThrow(yield* repo.getService(address)).require_dpop).toBe(true)
          expect(yield* hotReads).toEqual({ token: true, route: true })
          // A replacement without it turns it off, as it does a rate limit.
          yield* repo.putService(address, { name: "billing", auth_type: "oauth", handler: ECHO }, "upsert", T2, TEST_ACTOR)
          expect(Object.keys(Option.getOrThrow(yield* repo.getService(address)))).not.toContain("require_dpop")
          expect(yield* hotReads).toEqual({ token: false, route: false })
        }))

      it.effect("putService in upsert mode creates a missing service and answers true", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const existing = yield* givenService()
          const address = { ...existing, uuid: newUuid() }
          expect(yield* repo.putService(address, { name: "new", auth_type: "none", handler: ECHO }, "upsert", T0, TEST_ACTOR)).toBe(true)
          expect(Option.getOrThrow(yield* repo.getService(address)).name).toBe("new")
        }))

      it.effect("putService fails with NotFound for a missing profile or environment", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const fields = { name: "x", auth_type: "oauth", handler: ECHO } as const
          const noProfile = yield* Effect.flip(
            repo.putService({ profile: newProfile(), environment: PRODUCTION, uuid: newUuid() }, fields, "create", T0, TEST_ACTOR)
          )
          expect(noProfile._tag).toBe("NotFound")
          const existing = yield* givenService()
          const noEnvironment = yield* Effect.flip(
            repo.putService({ ...existing, environment: STAGING, uuid: newUuid() }, fields, "upsert", T0, TEST_ACTOR)
          )
          expect(noEnvironment._tag).toBe("NotFound")
        }))

      it.effect("getService is none for an unknown service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          expect(Option.isNone(yield* repo.getService({ ...address, uuid: newUuid() }))).toBe(true)
          expect(Option.isNone(yield* repo.getService({ ...address, environment: STAGING }))).toBe(true)
        }))

      it.effect("the same uuid may exist in two environments, each with its own credentials", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const production = yield* givenService()
          const staging: ServiceAddress = { ...production, environment: STAGING }
          yield* repo.putEnvironment(production.profile, STAGING, T0, TEST_ACTOR)
          expect(yield* repo.putService(staging, { name: "staging", auth_type: "none", handler: ECHO }, "create", T0, TEST_ACTOR))
            .toBe(true)
          const [productionId] = yield* givenCredentials(production, 1)
          expect(Option.getOrThrow(yield* repo.getService(production)).name).toBe("billing")
          expect(Option.getOrThrow(yield* repo.getService(staging))).toEqual({
            uuid: production.uuid,
            name: "staging",
            auth_type: "none",
            handler: ECHO,
            credentials: []
          })
          expect(yield* liveness(production, productionId!)).toEqual({ token: true, route: true })
          expect(yield* liveness(staging, productionId!)).toEqual({ token: false, route: false })
        }))
    })

    describe("applyCredentialChanges", () => {
      it.effect("adding a credential stores it and sets the service's auth_type to oauth", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ authType: "none" })
          const clientId = newClientId()
          yield* repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, clientId)], T1, TEST_ACTOR)
          const service = Option.getOrThrow(yield* repo.getService(address))
          expect(service.auth_type).toBe("oauth")
          expect(service.credentials).toEqual([{ client_id: clientId, created_at: T1, expires_at: null, last_used_at: null }])
          expect(service.credentials[0]!.created_at.getTime()).toBe(T1.getTime())
          const target = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(clientId)))
          expect(target.authType).toBe("oauth")
          expect(Option.getOrThrow(target.credential)).toEqual({
            clientId,
            secretHash: hashOf(clientId),
            lastUsedAt: null,
            expiresAt: null
          })
        }))

      it.effect("a third credential fails with CredentialLimitExceeded and writes nothing", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const ids = yield* givenCredentials(address, 2)
          const third = newClientId()
          const error = yield* Effect.flip(
            repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, third)], T2, TEST_ACTOR)
          )
          expect(error._tag).toBe("CredentialLimitExceeded")
          expect(yield* liveClientIds(address)).toEqual(ids)
          expect(yield* liveness(address, third)).toEqual({ token: false, route: false })
        }))

      it.effect("three additions in one change set fail whole", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ authType: "none" })
          const ids = [newClientId(), newClientId(), newClientId()]
          const error = yield* Effect.flip(
            repo.applyCredentialChanges(address.profile, ids.map((id) => add(address.environment, address.uuid, id)), T1, TEST_ACTOR)
          )
          expect(error._tag).toBe("CredentialLimitExceeded")
          const service = Option.getOrThrow(yield* repo.getService(address))
          expect(service.credentials).toEqual([])
          expect(service.auth_type).toBe("none")
        }))

      it.effect("a change set is all or nothing: a failing change undoes the valid changes on other services", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const full = yield* givenService()
          const fullIds = yield* givenCredentials(full, 2)
          const empty = yield* givenSibling(full)
          yield* repo.putService(empty, { name: "sibling", auth_type: "none", handler: ECHO }, "upsert", T0, TEST_ACTOR)
          const [validAdd, overLimit, validRemove] = [newClientId(), newClientId(), fullIds[0]!]
          const limitError = yield* Effect.flip(
            repo.applyCredentialChanges(full.profile, [
              add(empty.environment, empty.uuid, validAdd),
              remove(full.environment, full.uuid, validRemove),
              add(full.environment, full.uuid, overLimit),
              add(full.environment, full.uuid, newClientId())
            ], T2, TEST_ACTOR)
          )
          expect(limitError._tag).toBe("CredentialLimitExceeded")
          const notFoundError = yield* Effect.flip(
            repo.applyCredentialChanges(full.profile, [
              add(empty.environment, empty.uuid, validAdd),
              remove(full.environment, full.uuid, newClientId())
            ], T2, TEST_ACTOR)
          )
          expect(notFoundError._tag).toBe("NotFound")
          expect(yield* liveClientIds(full)).toEqual(fullIds)
          const sibling = Option.getOrThrow(yield* repo.getService(empty))
          expect(sibling.credentials).toEqual([])
          expect(sibling.auth_type).toBe("none")
          expect(yield* liveness(empty, validAdd)).toEqual({ token: false, route: false })
        }))

      it.effect("removing a credential that is not live on the service fails with NotFound", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [live] = yield* givenCredentials(address, 1)
          const sibling = yield* givenSibling(address)
          const [elsewhere] = yield* givenCredentials(sibling, 1)
          const [removed] = yield* givenCredentials(address, 1)
          yield* repo.applyCredentialChanges(address.profile, [remove(address.environment, address.uuid, removed!)], T2, TEST_ACTOR)

          for (const clientId of [newClientId(), elsewhere!, removed!]) {
            const error = yield* Effect.flip(
              repo.applyCredentialChanges(address.profile, [remove(address.environment, address.uuid, clientId)], T3, TEST_ACTOR)
            )
            expect(error._tag).toBe("NotFound")
          }
          expect(yield* liveClientIds(address)).toEqual([live])
          expect(yield* liveClientIds(sibling)).toEqual([elsewhere])
        }))

      it.effect("a removal and an addition in one change set succeed at the limit", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [oldest, kept] = yield* givenCredentials(address, 2)
          const replacement = newClientId()
          yield* repo.applyCredentialChanges(address.profile, [
            remove(address.environment, address.uuid, oldest!),
            add(address.environment, address.uuid, replacement)
          ], T2, TEST_ACTOR)
          expect(yield* liveClientIds(address)).toEqual([kept, replacement])
          expect(yield* liveness(address, oldest!)).toEqual({ token: false, route: false })

          // The order of the changes in the set does not matter.
          const another = newClientId()
          yield* repo.applyCredentialChanges(address.profile, [
            add(address.environment, address.uuid, another),
            remove(address.environment, address.uuid, kept!)
          ], T3, TEST_ACTOR)
          expect(yield* liveClientIds(address)).toEqual([replacement, another])
        }))

      it.effect("a change for an unknown profile, environment or service fails with NotFound", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const attempts: ReadonlyArray<[ProfileId, StoredChange]> = [
            [newProfile(), add(address.environment, address.uuid, newClientId())],
            [address.profile, add(STAGING, address.uuid, newClientId())],
            [address.profile, add(address.environment, newUuid(), newClientId())],
            [address.profile, remove(address.environment, newUuid(), newClientId())]
          ]
          for (const [profile, change] of attempts) {
            const error = yield* Effect.flip(repo.applyCredentialChanges(profile, [change], T1, TEST_ACTOR))
            expect(error._tag).toBe("NotFound")
          }
          expect(yield* liveClientIds(address)).toEqual([])
        }))

      it.effect("a client id is never reused, not even after its removal", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [removed] = yield* givenCredentials(address, 1)
          yield* repo.applyCredentialChanges(address.profile, [remove(address.environment, address.uuid, removed!)], T2, TEST_ACTOR)
          const sibling = yield* givenSibling(address)
          const [live] = yield* givenCredentials(sibling, 1)

          // A removed id added again, to its own service.
          const readdRemoved = yield* Effect.exit(
            repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, removed!)], T3, TEST_ACTOR)
          )
          // A live id added to another service.
          const addLiveElsewhere = yield* Effect.exit(
            repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, live!)], T3, TEST_ACTOR)
          )
          expect(yield* liveness(address, removed!)).toEqual({ token: false, route: false })
          expect(yield* liveness(address, live!)).toEqual({ token: false, route: false })
          expect(yield* liveness(sibling, live!)).toEqual({ token: true, route: true })
          expect(yield* liveClientIds(address)).toEqual([])
          expect(Exit.isFailure(readdRemoved)).toBe(true)
          expect(Exit.isFailure(addLiveElsewhere)).toBe(true)
        }))

      it.effect("one new client id added twice in one change set is refused whole", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ authType: "none" })
          const sibling = yield* givenSibling(address)
          const clientId = newClientId()
          const exit = yield* Effect.exit(
            repo.applyCredentialChanges(address.profile, [
              add(address.environment, address.uuid, clientId),
              add(sibling.environment, sibling.uuid, clientId)
            ], T1, TEST_ACTOR)
          )
          expect(Exit.isFailure(exit)).toBe(true)
          expect(yield* liveness(address, clientId)).toEqual({ token: false, route: false })
          expect(yield* liveness(sibling, clientId)).toEqual({ token: false, route: false })
          expect(Option.getOrThrow(yield* repo.getService(address)).auth_type).toBe("none")
        }))
    })

    describe("findTokenTarget", () => {
      it.effect("is none for an unknown profile, environment or service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [clientId] = yield* givenCredentials(address, 1)
          for (
            const unknown of [
              { ...address, profile: newProfile() },
              { ...address, environment: STAGING },
              { ...address, uuid: newUuid() }
            ]
          ) {
            expect(Option.isNone(yield* repo.findTokenTarget(unknown, Option.some(clientId!)))).toBe(true)
          }
        }))

      it.effect("tells the auth type, and the credential only when it is live on that very service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const open = yield* givenService({ authType: "none" })
          const openTarget = Option.getOrThrow(yield* repo.findTokenTarget(open, Option.some(newClientId())))
          expect(openTarget.authType).toBe("none")
          expect(Option.isNone(openTarget.credential)).toBe(true)

          const address = yield* givenService()
          const [clientId] = yield* givenCredentials(address, 1)
          const sibling = yield* givenSibling(address)
          const [siblingId] = yield* givenCredentials(sibling, 1)

          const target = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(clientId!)))
          expect(target.authType).toBe("oauth")
          expect(Option.getOrThrow(target.credential)).toEqual({ clientId, secretHash: hashOf(clientId!), lastUsedAt: null, expiresAt: null })

          const ofSibling = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(siblingId!)))
          expect(ofSibling.authType).toBe("oauth")
          expect(Option.isNone(ofSibling.credential)).toBe(true)
          expect(Option.isNone(Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(newClientId()))).credential))
            .toBe(true)
          expect(Option.isNone(Option.getOrThrow(yield* repo.findTokenTarget(address, Option.none())).credential))
            .toBe(true)

          yield* repo.applyCredentialChanges(address.profile, [remove(address.environment, address.uuid, clientId!)], T2, TEST_ACTOR)
          const afterRemoval = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(clientId!)))
          expect(afterRemoval.authType).toBe("oauth")
          expect(Option.isNone(afterRemoval.credential)).toBe(true)
        }))
    })

    describe("recordUse", () => {
      it.effect("records the time of the latest use", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const [used, unused] = yield* givenCredentials(address, 2)
          yield* repo.recordUse(used!, T2)
          const target = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(used!)))
          expect(Option.getOrThrow(target.credential).lastUsedAt?.getTime()).toBe(T2.getTime())
          yield* repo.recordUse(used!, T3)
          const service = Option.getOrThrow(yield* repo.getService(address))
          expect(service.credentials).toEqual([
            { client_id: used, created_at: T1, expires_at: null, last_used_at: T3 },
            { client_id: unused, created_at: T1, expires_at: null, last_used_at: null }
          ])
          expect(service.credentials[0]!.last_used_at?.getTime()).toBe(T3.getTime())
        }))
    })

    describe("findServiceRoute", () => {
      it.effect("is none for an unknown profile, environment or service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          for (
            const unknown of [
              { ...address, profile: newProfile() },
              { ...address, environment: STAGING },
              { ...address, uuid: newUuid() }
            ]
          ) {
            expect(Option.isNone(yield* repo.findServiceRoute(unknown, Option.none()))).toBe(true)
          }
        }))

      it.effect("carries the service's upstream approval and its profile's upstream origins, evicted when they change", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ handler: PROXY })
          const [clientId] = yield* givenCredentials(address, 1)
          const route = () => Effect.map(repo.findServiceRoute(address, Option.some(clientId!)), Option.getOrThrow)
          expect(yield* route()).toMatchObject({ upstreamApproved: false, upstreamOrigins: null })
          yield* repo.putProfile(address.profile, T1, TEST_ACTOR, undefined, ["https://api.example.com", "http://127.0.0.1:9"])
          expect((yield* route()).upstreamOrigins).toEqual(["https://api.example.com", "http://127.0.0.1:9"])
          expect(Option.getOrThrow(yield* repo.upstreamOrigins(address.profile))).toEqual(["https://api.example.com", "http://127.0.0.1:9"])
          expect(Option.getOrThrow(yield* repo.getProfile(address.profile)).upstream_origins).toEqual([
            "https://api.example.com",
            "http://127.0.0.1:9"
          ])
          yield* repo.putService(address, { name: "billing", auth_type: "oauth", handler: PROXY, upstream_approved: true }, "upsert", T1, TEST_ACTOR)
          expect((yield* route()).upstreamApproved).toBe(true)
          // Leaving them out keeps them; null removes them.
          yield* repo.putProfile(address.profile, T2, TEST_ACTOR, 30)
          expect((yield* route()).upstreamOrigins).toEqual(["https://api.example.com", "http://127.0.0.1:9"])
          yield* repo.putProfile(address.profile, T2, TEST_ACTOR, undefined, null)
          expect((yield* route()).upstreamOrigins).toBeNull()
          expect(Option.getOrThrow(yield* repo.getProfile(address.profile)).upstream_origins).toBeUndefined()
          expect(Option.getOrNull(yield* repo.upstreamOrigins(newProfile()))).toBeNull()
        }))

      it.effect("tells auth type, handler, and whether the client id is live on that service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService({ handler: PROXY })
          const [clientId] = yield* givenCredentials(address, 1)
          const sibling = yield* givenSibling(address)
          const [siblingId] = yield* givenCredentials(sibling, 1)

          expect(Option.getOrThrow(yield* repo.findServiceRoute(address, Option.some(clientId!)))).toEqual({
            authType: "oauth",
            handler: PROXY,
            credentialLive: true,
            credentialExpiresAt: null,
            rateLimit: null,
            requireDpop: false,
            upstreamApproved: false,
            upstreamOrigins: null
          })
          const notLive = [Option.none(), Option.some(siblingId!), Option.some(newClientId())]
          for (const candidate of notLive) {
            expect(Option.getOrThrow(yield* repo.findServiceRoute(address, candidate)).credentialLive).toBe(false)
          }
          yield* repo.applyCredentialChanges(address.profile, [remove(address.environment, address.uuid, clientId!)], T2, TEST_ACTOR)
          expect(Option.getOrThrow(yield* repo.findServiceRoute(address, Option.some(clientId!))).credentialLive)
            .toBe(false)
        }))
    })

    describe("deletion tombstones credentials", () => {
      /** Re-creates the same profile, environment and service uuid after a deletion. */
      const recreate = (address: ServiceAddress) =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          yield* repo.putProfile(address.profile, T3, TEST_ACTOR)
          yield* repo.putEnvironment(address.profile, address.environment, T3, TEST_ACTOR)
          yield* repo.putService(address, { name: "again", auth_type: "oauth", handler: ECHO }, "upsert", T3, TEST_ACTOR)
        })

      const expectDead = (address: ServiceAddress, clientIds: ReadonlyArray<ClientId>) =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          for (const clientId of clientIds) {
            const target = Option.getOrThrow(yield* repo.findTokenTarget(address, Option.some(clientId)))
            expect(Option.isNone(target.credential)).toBe(true)
            expect(Option.getOrThrow(yield* repo.findServiceRoute(address, Option.some(clientId))).credentialLive)
              .toBe(false)
          }
          expect(yield* liveClientIds(address)).toEqual([])
          // The old credentials do not count toward the limit of the re-created service.
          yield* givenCredentials(address, 2, T3)
        })

      it.effect("deleteService answers true then false; the old client ids stay dead on a re-created service", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const ids = yield* givenCredentials(address, 2)
          const sibling = yield* givenSibling(address)
          const [siblingId] = yield* givenCredentials(sibling, 1)
          expect(yield* repo.deleteService(address, T2, TEST_ACTOR)).toBe(true)
          expect(yield* repo.deleteService(address, T2, TEST_ACTOR)).toBe(false)
          expect(Option.isNone(yield* repo.getService(address))).toBe(true)
          expect(Option.isNone(yield* repo.findTokenTarget(address, Option.some(ids[0]!)))).toBe(true)
          expect(Option.isNone(yield* repo.findServiceRoute(address, Option.some(ids[0]!)))).toBe(true)
          // Other services keep their credentials.
          expect(yield* liveness(sibling, siblingId!)).toEqual({ token: true, route: true })
          yield* recreate(address)
          yield* expectDead(address, ids)
        }))

      it.effect("deleteEnvironment answers true then false; the old client ids stay dead after re-creation", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const ids = yield* givenCredentials(address, 2)
          const staging = yield* givenSibling(address, STAGING)
          const [stagingId] = yield* givenCredentials(staging, 1)
          expect(yield* repo.deleteEnvironment(address.profile, address.environment, T2, TEST_ACTOR)).toBe(true)
          expect(yield* repo.deleteEnvironment(address.profile, address.environment, T2, TEST_ACTOR)).toBe(false)
          const document = Option.getOrThrow(yield* repo.getProfile(address.profile))
          expect(document.environments.map((e) => e.name)).toEqual([STAGING])
          expect(Option.isNone(yield* repo.findTokenTarget(address, Option.some(ids[0]!)))).toBe(true)
          expect(yield* liveness(staging, stagingId!)).toEqual({ token: true, route: true })
          yield* recreate(address)
          yield* expectDead(address, ids)
        }))

      it.effect("deleteProfile answers true then false; the old client ids stay dead after re-creation", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const ids = yield* givenCredentials(address, 2)
          const staging = yield* givenSibling(address, STAGING)
          const stagingIds = yield* givenCredentials(staging, 1)
          expect(yield* repo.deleteProfile(address.profile, T2, TEST_ACTOR)).toBe(true)
          expect(yield* repo.deleteProfile(address.profile, T2, TEST_ACTOR)).toBe(false)
          expect(Option.isNone(yield* repo.getProfile(address.profile))).toBe(true)
          expect((yield* repo.listProfiles).some((p) => p.profile === address.profile)).toBe(false)
          expect(Option.isNone(yield* repo.findTokenTarget(address, Option.some(ids[0]!)))).toBe(true)
          yield* recreate(address)
          yield* expectDead(address, ids)
          yield* recreate(staging)
          yield* expectDead(staging, stagingIds)
        }))

      it.effect("deleting what does not exist answers false", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          expect(yield* repo.deleteService({ ...address, uuid: newUuid() }, T1, TEST_ACTOR)).toBe(false)
          expect(yield* repo.deleteEnvironment(address.profile, STAGING, T1, TEST_ACTOR)).toBe(false)
          expect(yield* repo.deleteEnvironment(newProfile(), PRODUCTION, T1, TEST_ACTOR)).toBe(false)
          expect(yield* repo.deleteProfile(newProfile(), T1, TEST_ACTOR)).toBe(false)
          expect(Option.isSome(yield* repo.getService(address))).toBe(true)
        }))
    })

    it.effect("ping succeeds", () => Effect.flatMap(CredentialRepo, (repo) => repo.ping))
  })

repoSuite("CredentialRepo (memory)", memoryStorage)
repoSuite("CredentialRepo (embedded PGlite)", embeddedStorage())
describeWithPostgres("PostgreSQL", () => {
  repoSuite("CredentialRepo (PostgreSQL)", postgresStorage())

  /**
   * Interleavings only a server with concurrent sessions allows (the memory store and PGlite run one
   * operation or transaction at a time). Each test forces its interleaving with row locks held by
   * other sessions, so it is deterministic; on a database of its own, so that no other test file's
   * session joins the lock queues it reads.
   */
  layer(isolatedPostgresStorage(), { excludeTestServices: true })("CredentialRepo (PostgreSQL interleavings)", (it) => {
    /** The pid of a backend that waits for a lock held by `blocker`. */
    const waiterOf = (blocker: number) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE ${blocker} = ANY (pg_blocking_pids(pid))`
      ).pipe(
        Effect.flatMap((rows) =>
          rows.length === 1 ? Effect.succeed(rows[0]!.pid) : Effect.fail(`waiters of ${blocker}: ${rows.length}`)
        ),
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")))
      )

    /**
     * Runs `deletion` while an addition to `address` is between its service lock and its commit:
     * a third session inserts the added client id uncommitted, so the addition, holding its lock
     * on the service row, waits on that insert; the deletion starts, and waits for the addition's
     * lock; then the third session rolls back and both complete.
     */
    const deleteDuringAddition = <A, E>(address: ServiceAddress, deletion: Effect.Effect<A, E, CredentialRepo>) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* CredentialRepo
        const clientId = newClientId()
        const blockerPid = yield* Deferred.make<number, unknown>()
        const release = yield* Deferred.make<void>()
        const blocker = yield* sql.withTransaction(Effect.gen(function*() {
          const pid = (yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`)[0]!.pid
          yield* sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at)
                     VALUES (${clientId}, ${newProfile()}, 'blocker', 'blocker', 'blocker', ${T0})`
          yield* Deferred.succeed(blockerPid, pid)
          yield* Deferred.await(release)
          return yield* Effect.fail("roll back" as const)
        })).pipe(
          Effect.tapErrorCause((cause) => Deferred.failCause(blockerPid, cause)),
          Effect.exit,
          Effect.fork
        )

        return yield* Effect.gen(function*() {
          // The blocking insert is in place before the addition starts.
          const blockingPid = yield* Deferred.await(blockerPid)
          const addition = yield* Effect.fork(Effect.exit(
            repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, clientId)], T1, TEST_ACTOR)
          ))
          const additionPid = yield* waiterOf(blockingPid)
          const deleting = yield* Effect.fork(Effect.exit(deletion))
          yield* waiterOf(additionPid)
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(blocker)
          const added = yield* Fiber.join(addition)
          const deleted = yield* Fiber.join(deleting)
          return { clientId, added, deleted }
        }).pipe(
          // Whatever happens, end the blocking session first, so no statement waits on it forever.
          Effect.ensuring(Effect.andThen(Deferred.succeed(release, undefined), Fiber.await(blocker)))
        )
      })

    // A deletion that tombstoned before taking the locks a save takes would miss a credential
    // whose save locked the service earlier and commits in between: the deletion would answer
    // true, the credential would stay live, and would verify again as soon as the service is
    // re-created under the same uuid.
    const deletions: ReadonlyArray<[string, (address: ServiceAddress) => Effect.Effect<boolean, unknown, CredentialRepo>]> = [
      ["deleteService", (address) => Effect.flatMap(CredentialRepo, (repo) => repo.deleteService(address, T2, TEST_ACTOR))],
      [
        "deleteEnvironment",
        (address) => Effect.flatMap(CredentialRepo, (repo) => repo.deleteEnvironment(address.profile, address.environment, T2, TEST_ACTOR))
      ],
      ["deleteProfile", (address) => Effect.flatMap(CredentialRepo, (repo) => repo.deleteProfile(address.profile, T2, TEST_ACTOR))]
    ]
    for (const [method, deletion] of deletions) {
      it.effect(`${method} concurrent with an addition leaves no live credential behind`, () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const address = yield* givenService()
          const { added, clientId, deleted } = yield* deleteDuringAddition(address, deletion(address))
          // The interleaving happened as intended: both operations went through.
          expect(Exit.isSuccess(added)).toBe(true)
          expect(deleted).toEqual(Exit.succeed(true))
          yield* repo.putProfile(address.profile, T3, TEST_ACTOR)
          yield* repo.putEnvironment(address.profile, address.environment, T3, TEST_ACTOR)
          yield* repo.putService(address, { name: "again", auth_type: "oauth", handler: ECHO }, "upsert", T3, TEST_ACTOR)
          expect(yield* liveness(address, clientId)).toEqual({ token: false, route: false })
          expect(yield* liveClientIds(address)).toEqual([])
        }))
    }
  })
})
