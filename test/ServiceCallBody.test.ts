/**
 * `POST /service/{profile}/{env}/json/{uuid}` over HTTP, as docs/contract.md §2 states it: the body checks (a JSON object,
 * 413 over the limit), and authentication before the body is read.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { admin, createFixture, makeTestServer, serverPort, sharedFixture } from "../src/testing.js"
import { callPath, callService, CHALLENGE, expectEcho, expectInvalidToken, expectServiceError } from "./support/Tokens.js"
import { asJsonResponse, rawRequest } from "./support/Http.js"
import { withToken } from "./support/ServiceCall.js"

/**
 * POSTs a body in chunks with `Transfer-Encoding: chunked` (no Content-Length), pausing `pauseMs`
 * between chunks so that the server reads a body that is still arriving.
 */
const chunkedCall = (
  path: string,
  headers: Record<string, string>,
  chunks: ReadonlyArray<string>,
  pauseMs = 0
) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      rawRequest(port, {
        method: "POST",
        path,
        headers: { "content-type": "application/json", ...headers },
        pieces: chunks,
        pauseMs,
        timeoutMs: 15_000
      })
    )).pipe(Effect.map(asJsonResponse))

/** A JSON object of exactly `bytes` bytes. */
const jsonObjectOfSize = (bytes: number) => {
  const skeleton = JSON.stringify({ pad: "" })
  return JSON.stringify({ pad: "x".repeat(bytes - skeleton.length) })
}

describe("POST /service/…: the body must be a JSON object", () => {
  const NOT_OBJECTS = ["[]", "[1,2]", `"text"`, "42", "null", "true", "{", "{\"a\":", "not json", "", "  "]

  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOpen = sharedFixture(createFixture({ authType: "none" }))

    it.effect("authorized, a body that is not a JSON object → 400 invalid_request (no challenge)", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (const body of NOT_OBJECTS) {
          const response = yield* callService(callPath(fixture), { token, body })
          expectServiceError(response, 400, "invalid_request")
        }
      }))

    it.effect("authorized, no body at all → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectServiceError(yield* callService(callPath(fixture), { token, body: null }), 400, "invalid_request")
      }))

    it.effect("auth_type none: 200 without a token, client_id null in the echo", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        const service = yield* admin.get(`/admin/profiles/${fixture.profile}`)
        expect(service.body.environments[0].services[0].auth_type).toBe("none")
        expectEcho(yield* callService(callPath(fixture), { body: `{"x":1}` }), fixture, null, { x: 1 })
      }))

    it.effect("auth_type none, a body that is not a JSON object → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        for (const body of NOT_OBJECTS) {
          expectServiceError(yield* callService(callPath(fixture), { body }), 400, "invalid_request")
        }
      }))
  })
})

describe("POST /service/…: authentication is checked before the body is read", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const sharedOauth = sharedFixture(createFixture())

    it.effect("no token and an invalid body → 401 invalid_token (bare challenge), not 400", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        for (const body of ["[]", "{", "null", ""]) {
          expectServiceError(yield* callService(callPath(fixture), { body }), 401, "invalid_token", CHALLENGE.bare)
        }
      }))

    it.effect("a malformed header and an invalid body → 400 with the invalid_request challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture), { authorization: "Basic xyz", body: "{" })
        expectServiceError(response, 400, "invalid_request", CHALLENGE.invalidRequest)
      }))

    it.effect("a bad token and an invalid body → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        expectInvalidToken(yield* callService(callPath(fixture), { token: "a.b.c", body: "[]" }))
      }))
  })
})

describe("POST /service/…: body size limit (maxBodyBytes 1024)", () => {
  layer(makeTestServer({ config: { maxBodyBytes: 1024 } }))((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOauth = sharedFixture(createFixture())
    const sharedOpen = sharedFixture(createFixture({ authType: "none" }))

    it.effect("authorized, a 2 KB JSON object → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const response = yield* callService(callPath(fixture), { token, body: jsonObjectOfSize(2048) })
        expectServiceError(response, 413, "invalid_request")
      }))

    // SERVER BUG: when an oversized body arrives chunked (no Content-Length) and is still streaming
    // while the server reads it, the server closes the connection without any answer ("socket hang
    // up") instead of 413. A declared Content-Length over the limit is answered 413 (test above).
    // Marked `fails` until fixed: remove `.fails` then.
    it.effect("authorized, a 2 KB body sent chunked (no Content-Length) → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(2048)
        const response = yield* chunkedCall(
          callPath(fixture),
          { authorization: `Bearer ${token}` },
          [body.slice(0, 512), body.slice(512, 1024), body.slice(1024, 1536), body.slice(1536)],
          50
        )
        expectServiceError(response, 413, "invalid_request")
      }))

    it.effect("authorized, exactly 1024 bytes is within the limit → 200", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(1024)
        expect(Buffer.byteLength(body)).toBe(1024)
        expectEcho(yield* callService(callPath(fixture), { token, body }), fixture, fixture.clientId, JSON.parse(body))
      }))

    it.effect("authorized, 1025 bytes → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(1025)
        expect(Buffer.byteLength(body)).toBe(1025)
        expectServiceError(yield* callService(callPath(fixture), { token, body }), 413, "invalid_request")
      }))

    it.effect("no token and a 2 KB body → 401 invalid_token with the bare challenge, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture), { body: jsonObjectOfSize(2048) })
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
      }))

    it.effect("no token and a 2 KB body sent chunked → 401, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const body = jsonObjectOfSize(2048)
        const response = yield* chunkedCall(callPath(fixture), {}, [body.slice(0, 1000), body.slice(1000)])
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
      }))

    it.effect("a bad token and a 2 KB body → 401 invalid_token, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        expectInvalidToken(yield* callService(callPath(fixture), { token: "a.b.c", body: jsonObjectOfSize(2048) }))
      }))

    it.effect("auth_type none and a 2 KB body → 413 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        expectServiceError(yield* callService(callPath(fixture), { body: jsonObjectOfSize(2048) }), 413, "invalid_request")
      }))

    it.effect("unknown service and a 2 KB body → 404 not_found", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const path = callPath({ ...fixture, uuid: randomUUID() })
        expectServiceError(yield* callService(path, { body: jsonObjectOfSize(2048) }), 404, "not_found")
      }))
  })
})
