/**
 * Service handlers an embedding program registers in code with `ServiceHandlers.layerWith`, behind
 * `POST /service/{profile}/{env}/json/{uuid}` (docs/contract.md §2): what they receive, when they
 * run, what their failures answer, and the full address a handler belongs to.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { AppConfig } from "../src/config/AppConfig.js"
import { makeDomainLayer, layerServe } from "../src/AppLayer.js"
import { ClientSecrets } from "../src/catalogue/ClientSecrets.js"
import { KeyService } from "../src/keys/KeyService.js"
import { BadGateway } from "../src/domain/Errors.js"
import { type ServiceCall, type ServiceHandler, ServiceHandlers } from "../src/service-call/ServiceHandlers.js"
import * as Storage from "../src/storage/Storage.js"
import { admin, createFixture, fixtureOf, issueToken, uniqueName } from "../src/testing.js"
import { callPath, callService, CHALLENGE, expectEcho, expectServiceError } from "./support/Tokens.js"
import { closedPort, expectBadGateway, startUpstream, stopUpstream } from "./support/ProxyHandler.js"

beforeAll(startUpstream)

afterAll(stopUpstream)

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
      const wrong = [
        `${HOME}/${CUSTOM_UUID}`,
        `${HOME}/production/not-a-uuid`,
        `${HOME}/../${CUSTOM_UUID}`,
        `/${HOME}/production/${CUSTOM_UUID}`
      ]
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
