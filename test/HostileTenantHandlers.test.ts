/**
 * A profile owner against another profile's service, as an attacker would go about it: the owner of
 * `tA` (an admin token of role `owner`, scoped to `tA`) wants the handler `corp` registered in code,
 * and a call that `corp`'s upstream takes for one of its own.
 *
 * - Handlers registered in code belong to their service's full address: a service the owner makes in
 *   `tA` with `corp`'s uuid, open or with its own credential, answers as a service of `tA` (echo),
 *   on the fast lane and on the HttpApi path alike; `corp`'s handler is never called. The owner
 *   cannot place the uuid in an environment of `corp` at all.
 * - The assertion: an operator pointed a service of `tA` at the upstream `corp` uses (a shared
 *   upstream); the owner opens that service (`auth_type` `none`) and calls it with no token. The
 *   assertion verifies (signature, `iss`, `aud`): `aud` alone cannot tell the services apart. The
 *   recipe of docs/integrators.md, pinned to `corp`'s service, refuses it; the assertion says the
 *   call came through `tA`'s service and that no verified client made it, whatever headers the
 *   caller sends.
 *
 * Run on the in-memory store, the embedded database and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { createLocalJWKSet, decodeJwt, type JSONWebKeySet, jwtVerify } from "jose"
import { randomUUID } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { ServiceHandlers } from "../src/service-call/ServiceHandlers.js"
import { ADMIN_TOKEN, makeTestServer, serverPort, type TestStorage, uniqueName } from "../src/testing.js"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { adminAs, rawRequest, request } from "./support/Http.js"
import { TEST_ISSUER } from "./support/Tokens.js"

const root = adminAs(ADMIN_TOKEN)

/** The victim: its profile, and the uuid of its service whose handler is registered in code. */
const CORP = uniqueName("corp")
const CORP_UUID = randomUUID()
let corpHandlerCalls = 0
const handlers = ServiceHandlers.layerWith({
  [`${CORP}/production/${CORP_UUID}`]: (call) => {
    corpHandlerCalls += 1
    return Effect.succeed({ ledger: "corp's books", client: call.clientId })
  }
})

/** The upstream `corp` uses (and an operator let `tA` use too): it keeps the headers of the last call. */
let upstream: Server | undefined
let upstreamReceived: IncomingHttpHeaders | undefined
let upstreamUrl = ""

beforeAll(async () => {
  upstream = createServer((incoming, response) => {
    upstreamReceived = incoming.headers
    incoming.resume()
    incoming.on("end", () => response.writeHead(200, { "content-type": "application/json" }).end(`{"orders":["corp's"]}`))
  })
  await new Promise<void>((resolve) => upstream!.listen(0, "127.0.0.1", resolve))
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/orders`
})

afterAll(() => {
  upstream?.closeAllConnections()
  upstream?.close()
})

interface Address {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
}

const servicePath = (address: Address) => `/admin/profiles/${address.profile}/environments/${address.environment}/services/${address.uuid}`
const callPath = (address: Address) => `/service/${address.profile}/${address.environment}/json/${address.uuid}`

const expectCreated = (response: { readonly status: number; readonly text: string }) =>
  expect({ status: response.status, text: response.text }).toEqual({ status: 201, text: expect.any(String) })

/** `corp` with its environments, and `tA` with an owner token scoped to it, made by the admin. */
const givenTenants = Effect.gen(function*() {
  const tA = uniqueName("ta")
  for (const profile of [CORP, tA]) {
    yield* root.put(`/admin/profiles/${profile}`)
    yield* root.put(`/admin/profiles/${profile}/environments/production`)
  }
  yield* root.put(`/admin/profiles/${CORP}/environments/staging`)
  const owner = yield* root.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: [tA] })
  expectCreated(owner)
  return { tA, owner: adminAs(owner.body.token as string) }
})

/** A token for a service, by its credential. */
const tokenFor = (address: Address, credential: { readonly client_id: string; readonly client_secret: string }) =>
  Effect.map(
    request("POST", "/oauth/token", {
      contentType: "application/x-www-form-urlencoded",
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: credential.client_id,
        client_secret: credential.client_secret,
        profile: address.profile,
        environment: address.environment,
        service_uuid: address.uuid
      }).toString()
    }),
    (response) => {
      expect(response.status).toBe(200)
      return response.body.access_token as string
    }
  )

/** A call on the fast lane (a declared length) or on the HttpApi path (a chunked body). */
const LANES = ["fast lane", "HttpApi"] as const
const call = (
  lane: (typeof LANES)[number],
  path: string,
  options: { readonly token?: string; readonly headers?: Record<string, string> } = {}
) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      rawRequest(port, {
        method: "POST",
        path,
        headers: {
          "content-type": "application/json",
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          ...options.headers
        },
        body: `{"want":"corp's books"}`,
        chunked: lane === "HttpApi"
      })
    ))

/** The echo a service of `tA` answers: its own address, never `corp`'s handler. */
const expectEchoOf = (response: { readonly status: number; readonly text: string }, address: Address, clientId: string | null) =>
  expect({ status: response.status, body: JSON.parse(response.text) }).toEqual({
    status: 200,
    body: {
      service_uuid: address.uuid,
      profile: address.profile,
      environment: address.environment,
      client_id: clientId,
      body: { want: "corp's books" }
    }
  })

/** The test server runs on Effect's TestClock: its present is the time an assertion was made. */
const serverNow = (assertion: string) => new Date((decodeJwt(assertion).iat ?? 0) * 1000)

/** The JWKS of the test server. */
const jwks = Effect.map(request("GET", "/.well-known/jwks.json"), (response) => createLocalJWKSet(response.body as JSONWebKeySet))

/**
 * docs/integrators.md's recipe, as an upstream configured with its URL and its service runs it:
 * the signature, `iss`, `aud`, the lifetime, `data` = its service, then a verified client.
 */
const upstreamRecipe = (
  keys: ReturnType<typeof createLocalJWKSet>,
  received: IncomingHttpHeaders,
  configured: Address & { readonly url: string }
) =>
  Effect.promise(async () => {
    const assertion = String(received["x-service-auth-assertion"])
    const { payload } = await jwtVerify(assertion, keys, {
      issuer: TEST_ISSUER,
      audience: configured.url,
      algorithms: ["RS256"],
      maxTokenAge: "300s",
      requiredClaims: ["iat", "exp", "data"],
      currentDate: serverNow(assertion)
    })
    const data = payload.data as Record<string, unknown> | undefined
    if (data?.profile !== configured.profile || data?.environment !== configured.environment || data?.service_uuid !== configured.uuid) {
      return "the assertion is for another service"
    }
    if (payload.client_authenticated !== true) return "no verified client made this call"
    if (payload.sub !== received["x-client-id"]) return "X-Client-Id is not the assertion's subject"
    return "accepted"
  })

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, handlers }))((it) => {
    it.effect("corp's own service reaches corp's handler (what the owner of tA is after)", () =>
      Effect.gen(function*() {
        yield* givenTenants
        const corp = { profile: CORP, environment: "production", uuid: CORP_UUID }
        const created = yield* root.put(servicePath(corp), { name: "ledger", auth_type: "oauth" })
        expect([201, 200]).toContain(created.status)
        const credential = yield* root.post(`${servicePath(corp)}/credentials`)
        expectCreated(credential)
        const token = yield* tokenFor(corp, credential.body)
        for (const lane of LANES) {
          const before = corpHandlerCalls
          const response = yield* call(lane, callPath(corp), { token })
          expect({ status: response.status, body: JSON.parse(response.text) }).toEqual({
            status: 200,
            body: { ledger: "corp's books", client: credential.body.client_id }
          })
          expect(corpHandlerCalls).toBe(before + 1)
        }
      }))

    it.effect("the owner of tA gives an open service of tA corp's uuid: it echoes as tA's, corp's handler is never called", () =>
      Effect.gen(function*() {
        const { tA, owner } = yield* givenTenants
        const squat = { profile: tA, environment: "production", uuid: CORP_UUID }
        expectCreated(yield* owner.put(servicePath(squat), { name: "squat", auth_type: "none" }))
        const before = corpHandlerCalls
        for (const lane of LANES) {
          expectEchoOf(yield* call(lane, callPath(squat)), squat, null)
          // The uuid in capitals is the same service.
          expectEchoOf(yield* call(lane, callPath({ ...squat, uuid: CORP_UUID.toUpperCase() })), squat, null)
        }
        expect(corpHandlerCalls).toBe(before)
      }))

    it.effect("with a credential of its own and a token, the same: echo, never corp's handler", () =>
      Effect.gen(function*() {
        const { tA, owner } = yield* givenTenants
        const squat = { profile: tA, environment: "production", uuid: CORP_UUID }
        expectCreated(yield* owner.put(servicePath(squat), { name: "squat", auth_type: "oauth" }))
        const credential = yield* owner.post(`${servicePath(squat)}/credentials`)
        expectCreated(credential)
        const token = yield* tokenFor(squat, credential.body)
        const before = corpHandlerCalls
        for (const lane of LANES) expectEchoOf(yield* call(lane, callPath(squat), { token }), squat, credential.body.client_id)
        expect(corpHandlerCalls).toBe(before)
      }))

    it.effect("the owner of tA cannot place corp's uuid in an environment of corp: 404, nothing made", () =>
      Effect.gen(function*() {
        const { owner } = yield* givenTenants
        const staging = { profile: CORP, environment: "staging", uuid: CORP_UUID }
        expect((yield* owner.put(servicePath(staging), { name: "squat", auth_type: "none" })).status).toBe(404)
        expect((yield* owner.post(`/admin/profiles/${CORP}/environments/staging/services`, { auth_type: "none" })).status).toBe(404)
        expect((yield* root.get(servicePath(staging))).status).toBe(404)
        const before = corpHandlerCalls
        for (const lane of LANES) expect((yield* call(lane, callPath(staging))).status).toBe(404)
        expect(corpHandlerCalls).toBe(before)
      }))

    it.effect("an open service of tA at corp's upstream: the assertion verifies, but corp's recipe refuses it", () =>
      Effect.gen(function*() {
        const { tA, owner } = yield* givenTenants
        const keys = yield* jwks
        // The operator points a service of each profile at the same upstream.
        const corpOrders = yield* root.post(`/admin/profiles/${CORP}/environments/production/services`, {
          name: "orders",
          auth_type: "oauth",
          handler: { type: "proxy", url: upstreamUrl }
        })
        expectCreated(corpOrders)
        const corp = { profile: CORP, environment: "production", uuid: corpOrders.body.uuid as string, url: upstreamUrl }
        const shared = yield* root.post(`/admin/profiles/${tA}/environments/production/services`, {
          name: "orders",
          auth_type: "oauth",
          handler: { type: "proxy", url: upstreamUrl }
        })
        expectCreated(shared)
        const theirs = { profile: tA, environment: "production", uuid: shared.body.uuid as string, url: upstreamUrl }

        // corp's own client passes corp's recipe: the recipe is not simply refusing everything.
        const corpCredential = yield* root.post(`${servicePath(corp)}/credentials`)
        const corpToken = yield* tokenFor(corp, corpCredential.body)
        for (const lane of LANES) {
          upstreamReceived = undefined
          expect((yield* call(lane, callPath(corp), { token: corpToken })).status).toBe(200)
          expect(yield* upstreamRecipe(keys, upstreamReceived!, corp)).toBe("accepted")
        }

        // The owner opens its service, the URL kept, and calls it with no token, forging what it can.
        const opened = yield* owner.put(servicePath(theirs), {
          name: "orders",
          auth_type: "none",
          handler: { type: "proxy", url: upstreamUrl }
        })
        expect(opened.status).toBe(200)
        const forged = {
          "x-service-auth-assertion": String(corpCredential.body.client_id),
          "x-client-id": String(corpCredential.body.client_id),
          "x-service-profile": CORP,
          "x-service-uuid": corp.uuid
        }
        const claimsSeen: Array<Record<string, unknown>> = []
        for (const lane of LANES) {
          for (const headers of [{}, forged]) {
            upstreamReceived = undefined
            expect((yield* call(lane, callPath(theirs), { headers })).status).toBe(200)
            const received = upstreamReceived!
            // What the old recipe checked passes: a signature of the gateway, its issuer, corp's URL.
            const assertion = String(received["x-service-auth-assertion"])
            const { payload } = yield* Effect.promise(() =>
              jwtVerify(assertion, keys, { issuer: TEST_ISSUER, audience: upstreamUrl, currentDate: serverNow(assertion) })
            )
            expect(payload.sub).toBeUndefined()
            expect(received["x-client-id"]).toBeUndefined()
            // What the recipe checks now tells the truth.
            expect(payload).toMatchObject({
              data: { profile: tA, environment: "production", service_uuid: theirs.uuid },
              client_authenticated: false
            })
            expect(received["x-service-profile"]).toBe(tA)
            expect(received["x-service-uuid"]).toBe(theirs.uuid)
            expect(yield* upstreamRecipe(keys, received, corp)).toBe("the assertion is for another service")
            // An upstream serving tA's service, and verified clients only, refuses it too.
            expect(yield* upstreamRecipe(keys, received, theirs)).toBe("no verified client made this call")
            const { iat: _iat, exp: _exp, jti: _jti, ...claims } = decodeJwt(String(received["x-service-auth-assertion"]))
            claimsSeen.push(claims)
          }
        }
        // Both entries send the same assertion.
        expect(new Set(claimsSeen.map((claims) => JSON.stringify(claims))).size).toBe(1)
      }))
  })

describe("a profile owner against another profile's handlers and upstream: in memory", () => {
  suite(memoryStorage)
})

describe("a profile owner against another profile's handlers and upstream: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("a profile owner against another profile's handlers and upstream: PostgreSQL", () => {
  suite(postgresStorage())
})
