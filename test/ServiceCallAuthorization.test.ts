/**
 * `POST /service/{profile}/{env}/json/{uuid}` over HTTP, as docs/contract.md §2 states it: 404 not_found, the RFC 6750
 * challenges of the Authorization header, and the echo handler.
 *
 * Servers are set up with `layer(...)` from @effect/vitest rather than `it.layer(...)`: the first
 * `it.layer(l)((it) => …)` in a file replaces the shared `it.layer` with its own nested variant, so
 * every later `it.layer(makeTestServer({ config }))` would be built on top of the first server's
 * layers and answer with the first server's configuration (e.g. its `maxBodyBytes`).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { createFixture, makeTestServer, sharedFixture, uniqueName } from "../src/testing.js"
import { callPath, callService, CHALLENGE, expectEcho, expectInvalidToken, expectServiceError } from "./support/Tokens.js"
import { withToken } from "./support/ServiceCall.js"

describe("POST /service/…: not found (404 not_found)", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())

    it.effect("unknown profile, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, profile: uniqueName("nowhere") })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("unknown environment, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, environment: "staging" })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("unknown service uuid, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, uuid: randomUUID() })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("a last segment that is not a uuid", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (const uuid of ["not-a-uuid", "123", `${fixture.uuid}0`, fixture.uuid.replace(/-/g, "")]) {
          expectServiceError(yield* callService(callPath({ ...fixture, uuid })), 404, "not_found")
          expectServiceError(yield* callService(callPath({ ...fixture, uuid }), { token }), 404, "not_found")
        }
      }))

    it.effect("a service of another profile is not found under this one", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const other = yield* createFixture()
        const path = callPath({ ...other, uuid: fixture.uuid })
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))
  })
})

describe("POST /service/…: the Authorization header (RFC 6750 §3)", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOauth = sharedFixture(createFixture())

    it.effect("oauth service without Authorization → 401 invalid_token, challenge without an error code", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture))
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
        expect(response.headers["www-authenticate"]).toBe(`Bearer realm="service"`)
      }))

    it.effect("a header that is not `Bearer <token>` → 400 invalid_request with the invalid_request challenge", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (
          const authorization of [
            "Basic xyz",
            `Basic ${Buffer.from(`${fixture.clientId}:${fixture.clientSecret}`).toString("base64")}`,
            "Bearer",
            "Bearer ",
            "Bearer a b",
            `Bearer ${token} ${token}`,
            "Token x",
            `Token ${token}`,
            `Bearer,${token}`,
            `Bearer:${token}`,
            `Bearer"${token}"`
          ]
        ) {
          const response = yield* callService(callPath(fixture), { authorization })
          expectServiceError(response, 400, "invalid_request", CHALLENGE.invalidRequest)
        }
      }))

    it.effect("the scheme is case-insensitive: bearer and BEARER", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectEcho(yield* callService(callPath(fixture), { authorization: `bearer ${token}` }), fixture, fixture.clientId)
        expectEcho(yield* callService(callPath(fixture), { authorization: `BEARER ${token}` }), fixture, fixture.clientId)
        expectEcho(yield* callService(callPath(fixture), { authorization: `BeArEr ${token}` }), fixture, fixture.clientId)
      }))

    it.effect("a valid token → 200 with exactly the echo {service_uuid, profile, environment, client_id, body}", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = { amount: 42, nested: { list: [1, "two", null, true], empty: {} }, text: "héllo ☃" }
        const response = yield* callService(callPath(fixture), { token, body: JSON.stringify(body) })
        expectEcho(response, fixture, fixture.clientId, body)
        expect(Object.keys(response.body).sort()).toEqual(["body", "client_id", "environment", "profile", "service_uuid"])
        expect(response.headers["www-authenticate"]).toBeUndefined()
      }))

    it.effect("an empty object body is echoed as {}", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectEcho(yield* callService(callPath(fixture), { token, body: "{}" }), fixture, fixture.clientId, {})
      }))

    it.effect("a token that is not a JWT at all → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        for (const token of ["abc", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", fixture.clientSecret]) {
          expectInvalidToken(yield* callService(callPath(fixture), { token }))
        }
      }))
  })
})
