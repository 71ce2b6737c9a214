/**
 * The repository suite: the hot reads (findTokenTarget, findServiceRoute) and the last use, on every storage (`onEveryStorage`).
 */
import { describe, expect } from "@effect/vitest"
import { Effect, Option } from "effect"
import { TEST_ACTOR } from "../src/testing.js"
import { Catalogue } from "./support/Catalogue.js"
import {
  givenCredentials,
  givenService,
  givenSibling,
  hashOf,
  newClientId,
  newProfile,
  newUuid,
  onEveryStorage,
  PROXY,
  remove,
  STAGING,
  T1,
  T2,
  T3
} from "./support/RepoSuite.js"

onEveryStorage("CatalogueHotReads", (it) => {
  describe("findTokenTarget", () => {
    it.effect("is none for an unknown profile, environment or service", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        yield* repo.putService(
          address,
          { name: "billing", auth_type: "oauth", handler: PROXY, upstream_approved: true },
          "upsert",
          T1,
          TEST_ACTOR
        )
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
        const repo = yield* Catalogue
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
})
