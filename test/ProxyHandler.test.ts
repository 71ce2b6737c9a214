/**
 * Service handlers behind `POST /service/{profile}/{env}/json/{uuid}` (docs/contract.md §2): the stored
 * `{"type":"proxy","url"}` handler against a local upstream (node:http on 127.0.0.1, port 0) that
 * answers well, slowly, wrongly or not at all; and handlers an embedding program registers in code
 * with `ServiceHandlers.layerWith`.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCall.test.ts.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { AppConfig } from "../src/config/AppConfig.js"
import { makeDomainLayer, layerServe } from "../src/AppLayer.js"
import { ClientSecrets } from "../src/auth/ClientSecrets.js"
import { KeyService } from "../src/auth/KeyService.js"
import { BadGateway } from "../src/domain/Errors.js"
import { type ServiceCall, ServiceHandlers } from "../src/gateway/ServiceHandlers.js"
import * as Storage from "../src/storage/Storage.js"
import { admin, createFixture, fixtureOf, issueToken, makeTestServer } from "../src/testing.js"
import { callPath, callService, CHALLENGE, expectEcho, expectServiceError } from "./support/Tokens.js"

// ---------------------------------------------------------------------------------------------
// The upstream

interface Received {
  readonly path: string
  readonly method: string
  readonly contentType: string | undefined
  readonly body: string
}

const UPSTREAM_ANSWER = { ok: true, total: 42, items: [{ id: 1 }, { id: 2, tags: ["a", "b"] }], nothing: null }

/** A local upstream whose answer depends on the path; it records every request it receives. */
const upstream = {
  server: undefined as NodeHttp.Server | undefined,
  received: [] as Array<Received>,
  url: (path: string) => `http://127.0.0.1:${(upstream.server!.address() as AddressInfo).port}${path}`,
  receivedAt: (path: string) => upstream.received.filter((request) => request.path === path)
}

/** The port of a listener that was opened and closed again: nothing answers there. */
let closedPort = 0

const startUpstream = async () => {
  upstream.server = NodeHttp.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const path = (request.url ?? "").split("?")[0]!
      upstream.received.push({
        path,
        method: request.method ?? "",
        contentType: request.headers["content-type"],
        body: Buffer.concat(chunks).toString("utf8")
      })
      const json = (status: number, text: string) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(text)
      }
      if (path.startsWith("/ok")) return json(200, JSON.stringify(UPSTREAM_ANSWER))
      if (path.startsWith("/empty-object")) return json(200, "{}")
      if (path.startsWith("/hang")) return // never answers
      if (path.startsWith("/text")) {
        response.writeHead(200, { "content-type": "text/plain" })
        return response.end("this is not JSON")
      }
      if (path.startsWith("/json-label-text")) return json(200, "this is not JSON either")
      if (path.startsWith("/array")) return json(200, "[1,2,3]")
      if (path.startsWith("/string")) return json(200, `"text"`)
      if (path.startsWith("/null")) return json(200, "null")
      if (path.startsWith("/empty")) return json(200, "")
      if (path.startsWith("/error-object")) return json(500, JSON.stringify({ error: "boom" }))
      if (path.startsWith("/not-found")) return json(404, JSON.stringify({ error: "missing" }))
      if (path.startsWith("/unavailable")) return json(503, JSON.stringify({ error: "later" }))
      if (path.startsWith("/redirect")) {
        response.writeHead(302, { location: upstream.url("/ok") })
        return response.end()
      }
      if (path.startsWith("/reset")) return request.socket.destroy()
      return json(404, "{}")
    })
  })
  await new Promise<void>((resolve) => upstream.server!.listen(0, "127.0.0.1", resolve))

  const probe = NodeHttp.createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
  closedPort = (probe.address() as AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
}

const stopUpstream = async () => {
  upstream.server?.closeAllConnections()
  await new Promise<void>((resolve) => (upstream.server ? upstream.server.close(() => resolve()) : resolve()))
}

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

const expectBadGateway = (response: Parameters<typeof expectServiceError>[0]) =>
  expectServiceError(response, 502, "bad_gateway")

// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Handlers registered in code

const CUSTOM_UUID = "0b5e4b8e-7a38-4c1e-9d55-3f1f6d6c2a01"
const FAILING_UUID = "0b5e4b8e-7a38-4c1e-9d55-3f1f6d6c2a02"
const INSPECTING_UUID = "0b5e4b8e-7a38-4c1e-9d55-3f1f6d6c2a03"
const OVERRIDING_UUID = "0b5e4b8e-7a38-4c1e-9d55-3f1f6d6c2a04"
const THROWING_UUID = "0b5e4b8e-7a38-4c1e-9d55-3f1f6d6c2a05"

const calls: Array<ServiceCall> = []

const registered = ServiceHandlers.layerWith({
  [CUSTOM_UUID]: (call) => {
    calls.push(call)
    return Effect.succeed({ custom: true, client: call.clientId })
  },
  [FAILING_UUID]: () => Effect.fail(new BadGateway({ description: "the registered handler failed" })),
  [INSPECTING_UUID]: (call) => Effect.succeed({ address: call.address, client: call.clientId, body: call.body }),
  [OVERRIDING_UUID]: () => Effect.succeed({ registered: "wins" }),
  [THROWING_UUID]: () => {
    throw new Error("a bug in the embedding program's handler")
  }
})

/** `makeTestServer()` with code-registered handlers: the same layers, built here. */
const serverWithHandlers = layerServe.pipe(
  Layer.provideMerge(
    makeDomainLayer({ keys: KeyService.layerTest, secrets: ClientSecrets.layerTest, handlers: registered })
  ),
  Layer.provideMerge(Storage.layerMemory),
  Layer.provideMerge(AppConfig.layerTest()),
  Layer.provideMerge(NodeHttpServer.layerTest),
  Layer.orDie
)

/** An oauth service at a fixed uuid (so a handler can be registered for it in advance), with a token. */
const serviceAtUuid = (uuid: string, options: { readonly authType?: "oauth" | "none"; readonly handler?: unknown } = {}) =>
  Effect.gen(function*() {
    const base = yield* createFixture()
    const servicePath = `/admin/profiles/${base.profile}/environments/${base.environment}/services/${uuid}`
    const created = yield* admin.put(servicePath, {
      name: "registered",
      auth_type: "oauth",
      ...(options.handler === undefined ? {} : { handler: options.handler })
    })
    expect(created.status).toBe(201)
    expect(created.body.uuid).toBe(uuid)
    const credential = yield* admin.post(`${servicePath}/credentials`)
    expect(credential.status).toBe(201)
    if (options.authType === "none") {
      expect((yield* admin.put(servicePath, { name: "registered", auth_type: "none" })).status).toBe(200)
    }
    const fixture = fixtureOf({ profile: base.profile, environment: base.environment, uuid }, credential.body)
    return { fixture, base, token: options.authType === "none" ? undefined : yield* issueToken(fixture) }
  })

describe("handlers registered in code (ServiceHandlers.layerWith)", () => {
  layer(serverWithHandlers)((it) => {
    it.effect("a registered handler answers its object", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAtUuid(CUSTOM_UUID)
        const response = yield* callService(callPath(fixture), { token, body: `{"a":1}` })
        expect({ status: response.status, body: response.body }).toEqual({
          status: 200,
          body: { custom: true, client: fixture.clientId }
        })
        expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
      }))

    it.effect("it receives the address, the verified client id and the body", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAtUuid(INSPECTING_UUID)
        const body = { n: 1, list: [true, null, "x"] }
        const response = yield* callService(callPath(fixture), { token, body: JSON.stringify(body) })
        expect({ status: response.status, body: response.body }).toEqual({
          status: 200,
          body: {
            address: { profile: fixture.profile, environment: fixture.environment, uuid: INSPECTING_UUID },
            client: fixture.clientId,
            body
          }
        })
      }))

    it.effect("it runs only after authentication: an unauthorized call never reaches it", () =>
      Effect.gen(function*() {
        const { fixture } = yield* serviceAtUuid(CUSTOM_UUID)
        const before = calls.length
        expectServiceError(yield* callService(callPath(fixture)), 401, "invalid_token", CHALLENGE.bare)
        expectServiceError(
          yield* callService(callPath(fixture), { authorization: "Basic xyz" }),
          400,
          "invalid_request",
          CHALLENGE.invalidRequest
        )
        expectServiceError(yield* callService(callPath(fixture), { token: "a.b.c" }), 401, "invalid_token", CHALLENGE.invalidToken)
        expect(calls.length).toBe(before)
      }))

    it.effect("for a service with auth_type none it gets client id null", () =>
      Effect.gen(function*() {
        const { fixture } = yield* serviceAtUuid(CUSTOM_UUID, { authType: "none" })
        const response = yield* callService(callPath(fixture))
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { custom: true, client: null } })
      }))

    it.effect("a registered handler that fails → 502 bad_gateway", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAtUuid(FAILING_UUID)
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a registered handler that throws → 502 bad_gateway, not 500", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAtUuid(THROWING_UUID)
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a registered handler takes precedence over the stored proxy handler", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAtUuid(OVERRIDING_UUID, {
          handler: { type: "proxy", url: `http://127.0.0.1:${closedPort}/never` }
        })
        const response = yield* callService(callPath(fixture), { token })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { registered: "wins" } })
      }))

    it.effect("services without a registered handler still echo", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        expectEcho(yield* callService(callPath(fixture), { token, body: `{"k":"v"}` }), fixture, fixture.clientId, { k: "v" })
      }))

    it.effect("the registered uuid answers through its handler in every profile and environment", () =>
      Effect.gen(function*() {
        const first = yield* serviceAtUuid(CUSTOM_UUID)
        const second = yield* serviceAtUuid(CUSTOM_UUID)
        expect(first.fixture.profile).not.toBe(second.fixture.profile)
        for (const { fixture, token } of [first, second]) {
          const response = yield* callService(callPath(fixture), { token })
          expect(response.body).toEqual({ custom: true, client: fixture.clientId })
        }
      }))
  })
})
