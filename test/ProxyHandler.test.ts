/**
 * Service handlers behind `POST /service/{profile}/{env}/json/{uuid}` (docs/contract.md §2): the stored
 * `{"type":"proxy","url"}` handler against a local upstream (node:http on 127.0.0.1, port 0) that
 * answers well, slowly, wrongly or not at all; and handlers an embedding program registers in code
 * with `ServiceHandlers.layerWith`.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCall.test.ts.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { AppConfig } from "../src/config/AppConfig.js"
import { makeDomainLayer, layerServe } from "../src/AppLayer.js"
import { ClientSecrets } from "../src/auth/ClientSecrets.js"
import { KeyService } from "../src/auth/KeyService.js"
import { BadGateway } from "../src/domain/Errors.js"
import { type ServiceCall, type ServiceHandler, ServiceHandlers } from "../src/gateway/ServiceHandlers.js"
import * as Storage from "../src/storage/Storage.js"
import { admin, createFixture, fixtureOf, issueToken, makeTestServer, uniqueName } from "../src/testing.js"
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

/** The profile the registered handlers belong to (one per run: tests may share a database). */
const HOME = uniqueName("registered")
/** A registered service's full address, the key its handler is registered under. */
const addressOf = (environment: string, uuid: string) => ({ profile: HOME, environment, uuid })
const keyOf = (address: { readonly profile: string; readonly environment: string; readonly uuid: string }) =>
  `${address.profile}/${address.environment}/${address.uuid}`

const calls: Array<ServiceCall> = []
const custom: ServiceHandler = (call) => {
  calls.push(call)
  return Effect.succeed({ custom: true, client: call.clientId })
}

const registered = ServiceHandlers.layerWith({
  [keyOf(addressOf("answers", CUSTOM_UUID))]: custom,
  [keyOf(addressOf("refuses", CUSTOM_UUID))]: custom,
  // Any casing of the uuid, as the service path accepts.
  [`${HOME}/open/${CUSTOM_UUID.toUpperCase()}`]: custom,
  [keyOf(addressOf("production", FAILING_UUID))]: () => Effect.fail(new BadGateway({ description: "the registered handler failed" })),
  [keyOf(addressOf("production", INSPECTING_UUID))]: (call) =>
    Effect.succeed({ address: call.address, client: call.clientId, body: call.body }),
  [keyOf(addressOf("production", OVERRIDING_UUID))]: () => Effect.succeed({ registered: "wins" }),
  [keyOf(addressOf("production", THROWING_UUID))]: () => {
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

/**
 * An oauth service at a fixed address (so that a handler can be registered for it in advance), with a
 * token. Its profile and environment are made when missing.
 */
const serviceAt = (
  address: { readonly profile: string; readonly environment: string; readonly uuid: string },
  options: { readonly authType?: "oauth" | "none"; readonly handler?: unknown } = {}
) =>
  Effect.gen(function*() {
    yield* admin.put(`/admin/profiles/${address.profile}`)
    yield* admin.put(`/admin/profiles/${address.profile}/environments/${address.environment}`)
    const servicePath = `/admin/profiles/${address.profile}/environments/${address.environment}/services/${address.uuid}`
    const created = yield* admin.put(servicePath, {
      name: "registered",
      auth_type: "oauth",
      ...(options.handler === undefined ? {} : { handler: options.handler })
    })
    expect(created.status).toBe(201)
    expect(created.body.uuid).toBe(address.uuid.toLowerCase())
    const credential = yield* admin.post(`${servicePath}/credentials`)
    expect(credential.status).toBe(201)
    if (options.authType === "none") {
      expect((yield* admin.put(servicePath, { name: "registered", auth_type: "none" })).status).toBe(200)
    }
    const fixture = fixtureOf({ ...address, uuid: address.uuid.toLowerCase() }, credential.body)
    return { fixture, token: options.authType === "none" ? undefined : yield* issueToken(fixture) }
  })

describe("handlers registered in code (ServiceHandlers.layerWith)", () => {
  layer(serverWithHandlers)((it) => {
    it.effect("a registered handler answers its object", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAt(addressOf("answers", CUSTOM_UUID))
        const response = yield* callService(callPath(fixture), { token, body: `{"a":1}` })
        expect({ status: response.status, body: response.body }).toEqual({
          status: 200,
          body: { custom: true, client: fixture.clientId }
        })
        expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
      }))

    it.effect("it receives the address, the verified client id and the body", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAt(addressOf("production", INSPECTING_UUID))
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
        const { fixture } = yield* serviceAt(addressOf("refuses", CUSTOM_UUID))
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
        const { fixture } = yield* serviceAt(addressOf("open", CUSTOM_UUID), { authType: "none" })
        const response = yield* callService(callPath(fixture))
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { custom: true, client: null } })
      }))

    it.effect("a registered handler that fails → 502 bad_gateway", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAt(addressOf("production", FAILING_UUID))
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a registered handler that throws → 502 bad_gateway, not 500", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAt(addressOf("production", THROWING_UUID))
        expectBadGateway(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a registered handler takes precedence over the stored proxy handler", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* serviceAt(addressOf("production", OVERRIDING_UUID), {
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

    it.effect("a handler belongs to its full address: the same uuid in another environment or profile echoes", () =>
      Effect.gen(function*() {
        const home = yield* serviceAt(addressOf("answers-too", CUSTOM_UUID))
        const otherProfile = yield* serviceAt({ profile: uniqueName("elsewhere"), environment: "answers", uuid: CUSTOM_UUID })
        const before = calls.length
        for (const { fixture, token } of [home, otherProfile]) {
          expectEcho(yield* callService(callPath(fixture), { token, body: "{}" }), fixture, fixture.clientId, {})
        }
        expect(calls.length).toBe(before)
      }))
  })
})

describe("handlers registered in code: keys that are not a service's full address", () => {
  const buildFailure = (registrations: Readonly<Record<string, ServiceHandler>>) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(ServiceHandlers.layerWith(registrations))))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      return Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
    })

  it.effect("a bare uuid (the key handlers once had) fails the layer's build, naming the key", () =>
    Effect.gen(function*() {
      const message = yield* buildFailure({ [CUSTOM_UUID]: custom })
      expect(message).toContain(`"${CUSTOM_UUID}" is a bare service uuid; write "profile/environment/${CUSTOM_UUID}"`)
    }))

  it.effect("so does anything else that is not profile/environment/uuid, every such key named", () =>
    Effect.gen(function*() {
      const wrong = [`${HOME}/${CUSTOM_UUID}`, `${HOME}/production/not-a-uuid`, `${HOME}/../${CUSTOM_UUID}`, `/${HOME}/production/${CUSTOM_UUID}`]
      const message = yield* buildFailure({
        [`${HOME}/production/${CUSTOM_UUID}`]: custom,
        ...Object.fromEntries(wrong.map((key) => [key, custom]))
      })
      for (const key of wrong) {
        expect(message).toContain(`"${key}" is not a service address "profile/environment/uuid"`)
      }
      expect(message).not.toContain(`"${HOME}/production/${CUSTOM_UUID}"`)
    }))

  it.effect("one service named twice (the uuid in two casings) fails too", () =>
    Effect.gen(function*() {
      const message = yield* buildFailure({
        [`${HOME}/production/${CUSTOM_UUID}`]: custom,
        [`${HOME}/production/${CUSTOM_UUID.toUpperCase()}`]: custom
      })
      expect(message).toContain(`names the service ${HOME}/production/${CUSTOM_UUID} a second time`)
    }))
})
