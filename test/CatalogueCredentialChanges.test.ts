/**
 * The repository suite: credential changes: the two-credential limit, all or nothing, client ids never reused, on every storage (`onEveryStorage`).
 */
import { describe, expect } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import type { ProfileId } from "../src/domain/Identifiers.js"
import type { StoredChange } from "../src/catalogue/CatalogueWrites.js"
import { TEST_ACTOR } from "../src/testing.js"
import { Catalogue } from "./support/Catalogue.js"
import {
  add,
  ECHO,
  givenCredentials,
  givenService,
  givenSibling,
  hashOf,
  liveClientIds,
  liveness,
  newClientId,
  newProfile,
  newUuid,
  onEveryStorage,
  remove,
  STAGING,
  T0,
  T1,
  T2,
  T3
} from "./support/RepoSuite.js"

onEveryStorage("CatalogueCredentialChanges", (it) => {
  describe("applyCredentialChanges", () => {
    it.effect("adding a credential stores it and sets the service's auth_type to oauth", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const full = yield* givenService()
        const fullIds = yield* givenCredentials(full, 2)
        const empty = yield* givenSibling(full)
        yield* repo.putService(empty, { name: "sibling", auth_type: "none", handler: ECHO }, "upsert", T0, TEST_ACTOR)
        const [validAdd, overLimit, validRemove] = [newClientId(), newClientId(), fullIds[0]!]
        const limitError = yield* Effect.flip(
          repo.applyCredentialChanges(
            full.profile,
            [
              add(empty.environment, empty.uuid, validAdd),
              remove(full.environment, full.uuid, validRemove),
              add(full.environment, full.uuid, overLimit),
              add(full.environment, full.uuid, newClientId())
            ],
            T2,
            TEST_ACTOR
          )
        )
        expect(limitError._tag).toBe("CredentialLimitExceeded")
        const notFoundError = yield* Effect.flip(
          repo.applyCredentialChanges(
            full.profile,
            [
              add(empty.environment, empty.uuid, validAdd),
              remove(full.environment, full.uuid, newClientId())
            ],
            T2,
            TEST_ACTOR
          )
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const address = yield* givenService()
        const [oldest, kept] = yield* givenCredentials(address, 2)
        const replacement = newClientId()
        yield* repo.applyCredentialChanges(
          address.profile,
          [
            remove(address.environment, address.uuid, oldest!),
            add(address.environment, address.uuid, replacement)
          ],
          T2,
          TEST_ACTOR
        )
        expect(yield* liveClientIds(address)).toEqual([kept, replacement])
        expect(yield* liveness(address, oldest!)).toEqual({ token: false, route: false })

        // The order of the changes in the set does not matter.
        const another = newClientId()
        yield* repo.applyCredentialChanges(
          address.profile,
          [
            add(address.environment, address.uuid, another),
            remove(address.environment, address.uuid, kept!)
          ],
          T3,
          TEST_ACTOR
        )
        expect(yield* liveClientIds(address)).toEqual([replacement, another])
      }))

    it.effect("a change for an unknown profile, environment or service fails with NotFound", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
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
        const repo = yield* Catalogue
        const address = yield* givenService({ authType: "none" })
        const sibling = yield* givenSibling(address)
        const clientId = newClientId()
        const exit = yield* Effect.exit(
          repo.applyCredentialChanges(
            address.profile,
            [
              add(address.environment, address.uuid, clientId),
              add(sibling.environment, sibling.uuid, clientId)
            ],
            T1,
            TEST_ACTOR
          )
        )
        expect(Exit.isFailure(exit)).toBe(true)
        expect(yield* liveness(address, clientId)).toEqual({ token: false, route: false })
        expect(yield* liveness(sibling, clientId)).toEqual({ token: false, route: false })
        expect(Option.getOrThrow(yield* repo.getService(address)).auth_type).toBe("none")
      }))
  })
})
