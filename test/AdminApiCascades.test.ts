/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: the cascades and tombstones that keep a deleted
 * credential dead for good.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { admin, createFixture, type Fixture, issueToken, makeTestServer, send } from "../src/testing.js"
import { expectNoContent, expectStatus, expectTokenStatus, paths } from "./support/AdminApi.js"

const callService = (fixture: Fixture, token: string) =>
  send(
    HttpClientRequest.post(`/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`).pipe(
      HttpClientRequest.bearerToken(token),
      HttpClientRequest.bodyUnsafeJson({ hello: "world" })
    )
  )

describe("admin API: cascades and tombstones", () => {
  /** Tokens for the old credential are refused, before and after the service is re-created under the same names. */
  const expectDeadAfterRecreate = <R>(fixture: Fixture, token: string, recreate: Effect.Effect<void, never, R>) =>
    Effect.gen(function*() {
      yield* expectTokenStatus(fixture.tokenFields, 400, "invalid_request")
      yield* recreate
      const recreated = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth" })
      expect({ status: recreated.status, credentials: recreated.body.credentials }).toEqual({ status: 201, credentials: [] })
      // Tombstones never revive: the same client id and secret on the same uuid stay refused.
      yield* expectTokenStatus(fixture.tokenFields, 401, "invalid_client")
      const call = yield* callService(fixture, token)
      expect(call.status).toBe(401)
      expect(call.body?.error).toBe("invalid_token")
    })

  layer(makeTestServer())((it) => {
    it.effect("deleting a service kills its credentials; re-creating the uuid does not revive them", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        expectNoContent(yield* admin.delete(fixture.servicePath))
        yield* expectDeadAfterRecreate(fixture, token, Effect.void)
      }))

    it.effect("deleting an environment kills its credentials; re-creating it and the service does not revive them", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        expectNoContent(yield* admin.delete(paths.environment(fixture.profile, fixture.environment)))
        yield* expectDeadAfterRecreate(
          fixture,
          token,
          Effect.map(admin.put(paths.environment(fixture.profile, fixture.environment)), (r) => expectStatus(r, 201))
        )
      }))

    it.effect("deleting a profile kills its credentials; re-creating it, the environment and the service does not revive them", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        expectNoContent(yield* admin.delete(paths.profile(fixture.profile)))
        yield* expectDeadAfterRecreate(
          fixture,
          token,
          Effect.gen(function*() {
            expectStatus(yield* admin.put(paths.profile(fixture.profile)), 201)
            expectStatus(yield* admin.put(paths.environment(fixture.profile, fixture.environment)), 201)
          })
        )
      }))

    it.effect("a deleted credential stays dead when its service is replaced by PUT", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectNoContent(yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`))
        expectStatus(yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth" }), 200)
        yield* expectTokenStatus(fixture.tokenFields, 401, "invalid_client")
      }))

    it.effect("other services, environments and profiles are untouched by a delete", () =>
      Effect.gen(function*() {
        const doomed = yield* createFixture()
        const survivor = yield* createFixture()
        expectNoContent(yield* admin.delete(paths.profile(doomed.profile)))
        yield* expectTokenStatus(survivor.tokenFields, 200)
      }))
  })
})
