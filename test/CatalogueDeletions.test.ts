/**
 * The repository suite: deletions tombstone credentials, and ping, on every storage (`onEveryStorage`).
 */
import { describe, expect } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { ClientId } from "../src/domain/Identifiers.js"
import type { ServiceAddress } from "../src/domain/ServiceAddress.js"
import { TEST_ACTOR } from "../src/testing.js"
import { Catalogue } from "./support/Catalogue.js"
import {
  ECHO,
  givenCredentials,
  givenService,
  givenSibling,
  liveClientIds,
  liveness,
  newProfile,
  newUuid,
  onEveryStorage,
  PRODUCTION,
  STAGING,
  T1,
  T2,
  T3
} from "./support/RepoSuite.js"

onEveryStorage("CatalogueDeletions", (it) => {
  describe("deletion tombstones credentials", () => {
    /** Re-creates the same profile, environment and service uuid after a deletion. */
    const recreate = (address: ServiceAddress) =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
        yield* repo.putProfile(address.profile, T3, TEST_ACTOR)
        yield* repo.putEnvironment(address.profile, address.environment, T3, TEST_ACTOR)
        yield* repo.putService(address, { name: "again", auth_type: "oauth", handler: ECHO }, "upsert", T3, TEST_ACTOR)
      })

    const expectDead = (address: ServiceAddress, clientIds: ReadonlyArray<ClientId>) =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const address = yield* givenService()
        expect(yield* repo.deleteService({ ...address, uuid: newUuid() }, T1, TEST_ACTOR)).toBe(false)
        expect(yield* repo.deleteEnvironment(address.profile, STAGING, T1, TEST_ACTOR)).toBe(false)
        expect(yield* repo.deleteEnvironment(newProfile(), PRODUCTION, T1, TEST_ACTOR)).toBe(false)
        expect(yield* repo.deleteProfile(newProfile(), T1, TEST_ACTOR)).toBe(false)
        expect(Option.isSome(yield* repo.getService(address))).toBe(true)
      }))
  })

  it.effect("ping succeeds", () => Effect.flatMap(Catalogue, (repo) => repo.ping))
})
