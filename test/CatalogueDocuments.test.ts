/**
 * The repository suite: profiles, environments and services as the admin API reads and writes them, on every storage (`onEveryStorage`).
 */
import { describe, expect } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { ClientId, ServiceUuid } from "../src/domain/Identifiers.js"
import type { ServiceAddress } from "../src/domain/ServiceAddress.js"
import { TEST_ACTOR } from "../src/testing.js"
import { Catalogue } from "./support/Catalogue.js"
import {
  add,
  ECHO,
  givenCredentials,
  givenService,
  liveness,
  newClientId,
  newProfile,
  newUuid,
  onEveryStorage,
  PRODUCTION,
  PROXY,
  STAGING,
  T0,
  T1,
  T2
} from "./support/RepoSuite.js"

onEveryStorage("CatalogueDocuments", (it) => {
  describe("profiles", () => {
    it.effect("putProfile creates once, then reports the profile existed and keeps its creation time", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        expect(Option.isNone(yield* repo.getProfile(newProfile()))).toBe(true)
      }))

    it.effect("listProfiles contains a created profile with its creation time", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
        const profile = newProfile()
        yield* repo.putProfile(profile, T1, TEST_ACTOR)
        const listed = (yield* repo.listProfiles).filter((p) => p.profile === profile)
        expect(listed).toHaveLength(1)
        expect(listed[0]!.created_at.getTime()).toBe(T1.getTime())
      }))

    it.effect("getProfile nests environments, services and credentials in order", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const profile = newProfile()
        yield* repo.putProfile(profile, T0, TEST_ACTOR)
        expect(yield* repo.putEnvironment(profile, PRODUCTION, T0, TEST_ACTOR)).toBe(true)
        expect(yield* repo.putEnvironment(profile, PRODUCTION, T1, TEST_ACTOR)).toBe(false)
        const document = Option.getOrThrow(yield* repo.getProfile(profile))
        expect(document.environments.map((e) => e.name)).toEqual([PRODUCTION])
      }))

    it.effect("putEnvironment on a missing profile fails with NotFound", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
        const profile = newProfile()
        const error = yield* Effect.flip(repo.putEnvironment(profile, PRODUCTION, T0, TEST_ACTOR))
        expect(error._tag).toBe("NotFound")
        expect(Option.isNone(yield* repo.getProfile(profile))).toBe(true)
      }))
  })

  describe("services", () => {
    it.effect("putService in create mode creates, then refuses an existing uuid with Conflict", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const existing = yield* givenService()
        const address = { ...existing, uuid: newUuid() }
        expect(yield* repo.putService(address, { name: "new", auth_type: "none", handler: ECHO }, "upsert", T0, TEST_ACTOR)).toBe(true)
        expect(Option.getOrThrow(yield* repo.getService(address)).name).toBe("new")
      }))

    it.effect("putService fails with NotFound for a missing profile or environment", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const address = yield* givenService()
        expect(Option.isNone(yield* repo.getService({ ...address, uuid: newUuid() }))).toBe(true)
        expect(Option.isNone(yield* repo.getService({ ...address, environment: STAGING }))).toBe(true)
      }))

    it.effect("the same uuid may exist in two environments, each with its own credentials", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
})
