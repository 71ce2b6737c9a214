/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: profiles and environments, every endpoint and its
 * errors.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { rawAdminRequest, unnormalizedRequest } from "./support/Http.js"
import { admin, ADMIN_TOKEN, createFixture, makeTestServer, uniqueName } from "../src/testing.js"
import { TIMESTAMP, createEnvironment, expectError, expectNoContent, expectStatus, paths } from "./support/AdminApi.js"

describe("admin API: profiles and environments", () => {
  layer(makeTestServer())((it) => {
    it.effect("PUT /admin/profiles/{profile} → 201 with the profile document, then 200 with the same", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        const created = yield* admin.put(paths.profile(profile))
        expect({ status: created.status, body: created.body }).toEqual({
          status: 201,
          body: { profile, created_at: TIMESTAMP, environments: [] }
        })
        const existed = yield* admin.put(paths.profile(profile))
        expect({ status: existed.status, body: existed.body }).toEqual({ status: 200, body: created.body })
      }))

    it.effect("GET /admin/profiles/{profile} → the whole document: environments, services, credentials", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* admin.get(paths.profile(fixture.profile))
        expect({ status: response.status, body: response.body }).toEqual({
          status: 200,
          body: {
            profile: fixture.profile,
            created_at: TIMESTAMP,
            environments: [{
              name: fixture.environment,
              services: [{
                uuid: fixture.uuid,
                name: "billing",
                auth_type: "oauth",
                handler: { type: "echo" },
                credentials: [{ client_id: fixture.clientId, created_at: TIMESTAMP, expires_at: null, last_used_at: null }]
              }]
            }]
          }
        })
      }))

    it.effect("GET /admin/profiles → {profiles: [{profile, created_at}]}", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        const created = yield* admin.put(paths.profile(profile))
        const response = yield* admin.get("/admin/profiles")
        expectStatus(response, 200)
        expect(Object.keys(response.body)).toEqual(["profiles"])
        for (const entry of response.body.profiles) expect(entry).toEqual({ profile: expect.any(String), created_at: TIMESTAMP })
        expect(response.body.profiles).toContainEqual({ profile, created_at: created.body.created_at })
      }))

    for (
      const [label, path] of [
        ["a b (percent-encoded)", "/admin/profiles/a%20b"],
        ["a slash (percent-encoded)", "/admin/profiles/a%2Fb"]
      ] as const
    ) {
      it.effect(`an invalid profile name, ${label} → 400 invalid_request on PUT and GET`, () =>
        Effect.gen(function*() {
          expectError(yield* admin.put(path), 400, "invalid_request")
          expectError(yield* admin.get(path), 400, "invalid_request")
        }))
    }

    // SERVER DEVIATION: any path segment over 100 characters misses the router (find-my-way's
    // default maxParamLength) and answers 404 "No PUT endpoint at this path".
    it.effect("an invalid profile name, 200 characters → 400 invalid_request on PUT and GET", () =>
      Effect.gen(function*() {
        const path = `/admin/profiles/${"p".repeat(200)}`
        expectError(yield* admin.put(path), 400, "invalid_request")
        expectError(yield* admin.get(path), 400, "invalid_request")
      }))

    it.effect("the profile name .. (sent unnormalised) → 400 invalid_request", () =>
      Effect.gen(function*() {
        const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", "content-length": "0" }
        expectError(yield* unnormalizedRequest("PUT", "/admin/profiles/..", headers), 400, "invalid_request")
        expectError(yield* unnormalizedRequest("GET", "/admin/profiles/..", headers), 400, "invalid_request")
      }))

    it.effect("an invalid environment name, a b (percent-encoded) → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectError(yield* admin.put(paths.environment(profile, "a%20b")), 400, "invalid_request")
        expectError(yield* admin.delete(paths.environment(profile, "a%20b")), 400, "invalid_request")
      }))

    // SERVER DEVIATION: as for profiles, a 200-character segment answers 404 not_found.
    it.effect("an invalid environment name, 200 characters → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectError(yield* admin.put(paths.environment(profile, "e".repeat(200))), 400, "invalid_request")
      }))

    it.effect("GET and DELETE of an unknown profile → 404 not_found", () =>
      Effect.gen(function*() {
        const profile = uniqueName("nowhere")
        expectError(yield* admin.get(paths.profile(profile)), 404, "not_found")
        expectError(yield* admin.delete(paths.profile(profile)), 404, "not_found")
      }))

    it.effect("DELETE a profile → 204, then it is gone from GET and from the list", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectNoContent(yield* admin.delete(paths.profile(profile)))
        expectError(yield* admin.get(paths.profile(profile)), 404, "not_found")
        expectError(yield* admin.delete(paths.profile(profile)), 404, "not_found")
        const list = yield* admin.get("/admin/profiles")
        expect(list.body.profiles.map((p: { profile: string }) => p.profile)).not.toContain(profile)
      }))

    it.effect("PUT an environment → 201, then 200; it shows in the profile document", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        yield* admin.put(paths.profile(profile))
        expectStatus(yield* admin.put(paths.environment(profile, "staging")), 201)
        expectStatus(yield* admin.put(paths.environment(profile, "staging")), 200)
        const document = yield* admin.get(paths.profile(profile))
        expect(document.body.environments).toEqual([{ name: "staging", services: [] }])
      }))

    it.effect("PUT an environment on an unknown profile → 404 not_found", () =>
      Effect.gen(function*() {
        expectError(yield* admin.put(paths.environment(uniqueName("nowhere"), "staging")), 404, "not_found")
      }))

    it.effect("DELETE an environment → 204; again → 404; on an unknown profile → 404", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        expectNoContent(yield* admin.delete(paths.environment(profile, environment)))
        expectError(yield* admin.delete(paths.environment(profile, environment)), 404, "not_found")
        expectError(yield* admin.delete(paths.environment(uniqueName("nowhere"), environment)), 404, "not_found")
        expect((yield* admin.get(paths.profile(profile))).body.environments).toEqual([])
      }))

    it.effect("PUT a profile or an environment with a body that is not JSON → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectError(yield* rawAdminRequest("PUT", paths.profile(uniqueName("profile")), "{not json"), 400, "invalid_request")
        expectError(yield* rawAdminRequest("PUT", paths.environment(profile, "staging"), "{not json"), 400, "invalid_request")
      }))

    // SERVER DEVIATION: the `{}` bodies are decoded with Schema.Struct({}), which lets unknown
    // fields through even with onExcessProperty: "error"; the profile is created (201).
    it.effect("PUT a profile with an unknown field → 400 invalid_request, nothing created", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        expectError(yield* admin.put(paths.profile(profile), { colour: "red" }), 400, "invalid_request")
        expectError(yield* admin.get(paths.profile(profile)), 404, "not_found")
      }))

    // SERVER DEVIATION: as above, the environment is created (201).
    it.effect("PUT an environment with an unknown field → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectError(yield* admin.put(paths.environment(profile, "staging"), { colour: "red" }), 400, "invalid_request")
      }))

    // SERVER DEVIATION: same cause, Schema.Struct({}) accepts any non-null JSON value (an array, a string).
    it.effect("PUT a profile or an environment with a JSON body that is not an object → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        expectError(yield* admin.put(paths.profile(uniqueName("profile")), [1, 2]), 400, "invalid_request")
        expectError(yield* admin.put(paths.environment(profile, "staging"), "staging"), 400, "invalid_request")
      }))
  })
})
