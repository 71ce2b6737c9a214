/**
 * The stored `{"type":"proxy","url"}` service handler behind `POST /service/{profile}/{env}/json/{uuid}`
 * (docs/contract.md §2) against a local upstream (node:http on 127.0.0.1, port 0) that answers well,
 * slowly, wrongly or not at all. Handlers registered in code: test/RegisteredHandlers.test.ts.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { admin, createFixture, issueToken, makeTestServer } from "../src/testing.js"
import { callPath, callService, CHALLENGE, expectServiceError } from "./support/Tokens.js"
import { UPSTREAM_ANSWER, closedPort, expectBadGateway, startUpstream, stopUpstream, upstream } from "./support/ProxyHandler.js"

beforeAll(startUpstream)

afterAll(stopUpstream)

/** An oauth service proxying to `url`, with a credential and a token. */
const proxyService = (url: string) =>
  Effect.gen(function*() {
    const fixture = yield* createFixture({ handler: { type: "proxy", url } })
    const stored = yield* admin.get(fixture.servicePath.replace(/\/services\/.*$/, "").replace(/\/environments\/.*$/, ""))
    const service = stored.body.environments[0].services.find((s: { uuid: string }) => s.uuid === fixture.uuid)
    expect(service.handler).toEqual({ type: "proxy", url })
    return { fixture, token: yield* issueToken(fixture) }
  })

describe("proxy handler", () => {
  layer(makeTestServer())((it) => {
    it.effect("forwards the JSON body and answers the upstream's JSON object exactly", () =>
      Effect.gen(function*() {
        const path = `/ok/${randomUUID()}`
        const { fixture, token } = yield* proxyService(upstream.url(path))
        const body = { order: 7, lines: [{ sku: "A-1", qty: 2 }], note: "héllo ☃", flag: false, none: null }
        const response = yield* callService(callPath(fixture), { token, body: JSON.stringify(body) })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: UPSTREAM_ANSWER })
        expect(response.headers["content-type"]).toMatch(/^application\/json\b/)

        const received = upstream.receivedAt(path)
        expect(received).toHaveLength(1)
        expect(received[0]!.method).toBe("POST")
        expect(received[0]!.contentType).toMatch(/^application\/json\b/)
        expect(JSON.parse(received[0]!.body)).toEqual(body)
      }))

    it.effect("an empty object travels as {} and an upstream {} comes back as {}", () =>
      Effect.gen(function*() {
        const path = `/empty-object/${randomUUID()}`
        const { fixture, token } = yield* proxyService(upstream.url(path))
        const response = yield* callService(callPath(fixture), { token, body: "{}" })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: {} })
        expect(upstream.receivedAt(path).map((request) => JSON.parse(request.body))).toEqual([{}])
      }))

    it.effect("the upstream is not contacted when the caller is not authorized", () =>
      Effect.gen(function*() {
        const path = `/ok/${randomUUID()}`
        const { fixture } = yield* proxyService(upstream.url(path))
        expectServiceError(yield* callService(callPath(fixture)), 401, "invalid_token", CHALLENGE.bare)
        expectServiceError(yield* callService(callPath(fixture), { token: "a.b.c" }), 401, "invalid_token", CHALLENGE.invalidToken)
        expect(upstream.receivedAt(path)).toEqual([])
      }))

    it.effect("the upstream is not contacted when the body is not a JSON object", () =>
      Effect.gen(function*() {
        const path = `/ok/${randomUUID()}`
        const { fixture, token } = yield* proxyService(upstream.url(path))
        expectServiceError(yield* callService(callPath(fixture), { token, body: "[1]" }), 400, "invalid_request")
        expect(upstream.receivedAt(path)).toEqual([])
      }))

    it.effect("upstream answers non-JSON → 502 bad_gateway", () =>
      Effect.gen(function*() {
        for (const path of ["/text", "/json-label-text", "/empty"]) {
          const { fixture, token } = yield* proxyService(upstream.url(path))
          expectBadGateway(yield* callService(callPath(fixture), { token }))
        }
      }))

    it.effect("upstream answers JSON that is not an object (array, string, null) → 502 bad_gateway", () =>
      Effect.gen(function*() {
        for (const path of ["/array", "/string", "/null"]) {
          const { fixture, token } = yield* proxyService(upstream.url(path))
          expectBadGateway(yield* callService(callPath(fixture), { token }))
        }
      }))

    it.effect("upstream answers 500 (with a JSON object body) → 502 bad_gateway", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* proxyService(upstream.url("/error-object"))
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("upstream answers 503 → 502 bad_gateway; 404 with a JSON object is passed on", () =>
      Effect.gen(function*() {
        const unavailable = yield* proxyService(upstream.url("/unavailable"))
        expectBadGateway(yield* callService(callPath(unavailable.fixture), { token: unavailable.token }))
        const notFound = yield* proxyService(upstream.url("/not-found"))
        const response = yield* callService(callPath(notFound.fixture), { token: notFound.token })
        expect({ status: response.status, body: response.body }).toEqual({ status: 404, body: { error: "missing" } })
      }))

    it.effect("upstream closes the connection without answering → 502 bad_gateway", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* proxyService(upstream.url("/reset"))
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("upstream unreachable (closed port) → 502 bad_gateway", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* proxyService(`http://127.0.0.1:${closedPort}/ok`)
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("upstream redirects → 502 bad_gateway (redirects are not followed)", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* proxyService(upstream.url("/redirect"))
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a proxy service with auth_type none forwards without a token", () =>
      Effect.gen(function*() {
        const path = `/ok/${randomUUID()}`
        const fixture = yield* createFixture({ authType: "none" })
        const updated = yield* admin.put(fixture.servicePath, {
          name: "billing",
          auth_type: "none",
          handler: { type: "proxy", url: upstream.url(path) }
        })
        expect(updated.status).toBe(200)
        const response = yield* callService(callPath(fixture), { body: `{"x":1}` })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: UPSTREAM_ANSWER })
        expect(upstream.receivedAt(path).map((request) => JSON.parse(request.body))).toEqual([{ x: 1 }])
      }))
  })
})

describe("proxy handler: upstream timeout (upstreamTimeoutMs 300)", () => {
  layer(makeTestServer({ config: { upstreamTimeoutMs: 300 } }))((it) => {
    it.effect("an upstream that never answers → 502 bad_gateway once the timeout has run out", () =>
      Effect.gen(function*() {
        const path = `/hang/${randomUUID()}`
        const { fixture, token } = yield* proxyService(upstream.url(path))
        const started = Date.now()
        const response = yield* callService(callPath(fixture), { token, body: `{"slow":true}` })
        const elapsed = Date.now() - started
        expectBadGateway(response)
        // Not before the timeout (300 ms), and within it plus a wide margin for a busy machine.
        expect(elapsed).toBeGreaterThanOrEqual(250)
        expect(elapsed).toBeLessThan(300 + 4_700)
        // It did reach the upstream, which simply never answered.
        expect(upstream.receivedAt(path).map((request) => JSON.parse(request.body))).toEqual([{ slow: true }])
      }))

    it.effect("a fast upstream is unaffected by the short timeout", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* proxyService(upstream.url("/ok"))
        const response = yield* callService(callPath(fixture), { token })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: UPSTREAM_ANSWER })
      }))
  })
})

// Handlers registered in code
