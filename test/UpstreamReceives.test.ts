/**
 * A proxy service in front of a real upstream (docs/contract.md §2, "Proxy services"): what the
 * upstream receives. The identity headers, an assertion that verifies with jose against the JWKS, the
 * static headers, and nothing else of the caller's (a forged X-Client-Id included); static header
 * values never in an admin answer or the audit trail, kept or replaced as documented, stored sealed.
 */
import { HttpClientRequest } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, TestClock } from "effect"
import * as Jose from "jose"
import { admin, makeTestServer, send } from "../src/testing.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { describeWithPostgres, isolatedPostgresStorage } from "./support/Databases.js"
import { ENTRIES, proxyService, startUpstream, stopUpstream, throughLane, upstream } from "./support/UpstreamGateway.js"

beforeAll(startUpstream)

afterAll(stopUpstream)

const jwks = Effect.map(send(HttpClientRequest.get("/.well-known/jwks.json")), (response) => Jose.createLocalJWKSet(response.body))

/**
 * The headers any HTTP client adds on its own, besides the gateway's, and the trace context (the
 * tests' runtime has its tracer on; production only while traces are exported).
 */
const TRANSPORT = new Set(["host", "connection", "content-length", "traceparent"])

describe("what the upstream receives", () => {
  layer(makeTestServer())((it) => {
    for (const [entry, call] of ENTRIES) {
      it.effect(`${entry}: identity headers, a verifiable assertion, and nothing of the caller's`, () =>
        Effect.gen(function*() {
          const { fixture, key, token } = yield* proxyService()
          const body = JSON.stringify({ order: 7, note: "héllo" })
          const response = yield* call(fixture, token, body, {
            "x-client-id": "svc_forged",
            "x-service-profile": "forged",
            "x-request-id": "forged",
            "x-service-auth-assertion": "forged",
            "x-api-key": "from-the-caller",
            cookie: "session=1",
            "x-forwarded-for": "10.0.0.1"
          })
          expect(response.status).toBe(200)
          expect(response.body).toEqual({ ok: true, key })

          const [received] = yield* upstream.received(key)
          const headers = received!.headers
          expect(JSON.parse(received!.body)).toEqual(JSON.parse(body))
          expect(Object.keys(headers).filter((name) => !TRANSPORT.has(name)).sort()).toEqual([
            "accept",
            "content-type",
            "x-client-id",
            "x-request-id",
            "x-service-auth-assertion",
            "x-service-environment",
            "x-service-profile",
            "x-service-uuid"
          ])
          expect(headers["x-client-id"]).toBe(fixture.clientId)
          expect(headers["x-service-profile"]).toBe(fixture.profile)
          expect(headers["x-service-environment"]).toBe(fixture.environment)
          expect(headers["x-service-uuid"]).toBe(fixture.uuid)
          expect(headers["x-request-id"]).toMatch(/^[0-9a-f]{16}$/)
          expect(headers["content-type"]).toBe("application/json")

          const now = yield* Clock.currentTimeMillis
          const keySet = yield* jwks
          const { payload, protectedHeader } = yield* Effect.promise(() =>
            Jose.jwtVerify(headers["x-service-auth-assertion"]!, keySet, {
              issuer: "http://issuer.test",
              audience: upstream.url(key),
              algorithms: ["RS256"],
              currentDate: new Date(now)
            })
          )
          expect(protectedHeader.alg).toBe("RS256")
          expect(payload.sub).toBe(fixture.clientId)
          expect(payload.data).toEqual({ service_uuid: fixture.uuid, profile: fixture.profile, environment: fixture.environment })
          expect(payload.client_authenticated).toBe(true)
          expect(payload.exp! - payload.iat!).toBeLessThanOrEqual(300)
          expect(typeof payload.jti).toBe("string")
        }))
    }

    it.effect("an assertion is reused by one caller for a minute, then made anew", () =>
      Effect.gen(function*() {
        const { fixture, key, token } = yield* proxyService()
        yield* throughLane(fixture, token)
        yield* throughLane(fixture, token)
        yield* TestClock.adjust("61 seconds")
        yield* throughLane(fixture, token)
        const assertions = (yield* upstream.received(key)).map((r) => r.headers["x-service-auth-assertion"])
        expect(assertions[0]).toBe(assertions[1])
        expect(assertions[2]).not.toBe(assertions[0])
        const requestIds = new Set((yield* upstream.received(key)).map((r) => r.headers["x-request-id"]))
        expect(requestIds.size).toBe(3)
      }))

    it.effect("a service without OAuth: no X-Client-Id, an assertion without sub, client_authenticated false", () =>
      Effect.gen(function*() {
        const { fixture, key } = yield* proxyService({}, "none")
        expect((yield* throughLane(fixture, undefined, "{}", { "x-client-id": "svc_forged" })).status).toBe(200)
        const [received] = yield* upstream.received(key)
        expect(received!.headers["x-client-id"]).toBeUndefined()
        const assertion = Jose.decodeJwt(received!.headers["x-service-auth-assertion"]!)
        expect(assertion.sub).toBeUndefined()
        expect(assertion.client_authenticated).toBe(false)
        expect(assertion.aud).toBe(upstream.url(key))
      }))

    it.effect("static headers reach the upstream; their values are never answered", () =>
      Effect.gen(function*() {
        const secret = `key-${Math.random().toString(36).slice(2)}-value`
        const { fixture, key, token } = yield* proxyService({ headers: { "X-Api-Key": secret, Authorization: `Token ${secret}` } })
        yield* throughLane(fixture, token)
        const [received] = yield* upstream.received(key)
        expect(received!.headers["x-api-key"]).toBe(secret)
        expect(received!.headers["authorization"]).toBe(`Token ${secret}`)

        const service = yield* admin.get(fixture.servicePath)
        expect(service.body.handler).toEqual({ type: "proxy", url: upstream.url(key), headers: ["Authorization", "X-Api-Key"] })
        const answers = [
          service,
          yield* admin.get(`/admin/profiles/${fixture.profile}`),
          yield* admin.get(`/admin/audit?profile=${fixture.profile}`),
          // Written back as read: the names keep their values.
          yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: service.body.handler }),
          // Without headers: kept.
          yield* admin.put(fixture.servicePath, {
            name: "billing",
            auth_type: "oauth",
            handler: { type: "proxy", url: upstream.url(key), timeout_ms: 5000 }
          })
        ]
        for (const answer of answers) expect(answer.text).not.toContain(secret)
        expect(answers[4]!.body.handler).toEqual({
          type: "proxy",
          url: upstream.url(key),
          timeout_ms: 5000,
          headers: ["Authorization", "X-Api-Key"]
        })
        yield* throughLane(fixture, token)
        expect((yield* upstream.received(key))[1]!.headers["x-api-key"]).toBe(secret)

        // An object replaces them all; {} removes them.
        yield* admin.put(fixture.servicePath, {
          name: "billing",
          auth_type: "oauth",
          handler: { type: "proxy", url: upstream.url(key), headers: { "X-Other": "v2" } }
        })
        yield* throughLane(fixture, token)
        const third = (yield* upstream.received(key))[2]!.headers
        expect([third["x-other"], third["x-api-key"]]).toEqual(["v2", undefined])
        const removed = yield* admin.put(fixture.servicePath, {
          name: "billing",
          auth_type: "oauth",
          handler: { type: "proxy", url: upstream.url(key), headers: {} }
        })
        expect(removed.body.handler).toEqual({ type: "proxy", url: upstream.url(key) })
      }))

    it.effect("static headers that cannot be: 400 invalid_request naming the problem", () =>
      Effect.gen(function*() {
        const { fixture, key } = yield* proxyService()
        const put = (headers: unknown) =>
          admin.put(fixture.servicePath, {
            name: "billing",
            auth_type: "oauth",
            handler: { type: "proxy", url: upstream.url(key), headers }
          })
        const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, "v"]))
        for (
          const headers of [
            { Host: "x" },
            { "X-Client-Id": "x" },
            { "Content-Length": "1" },
            { Connection: "close" },
            { "bad name": "x" },
            { "X-Ok": "line\r\nbreak" },
            eleven,
            ["X-Never-Stored"]
          ]
        ) {
          const answer = yield* put(headers)
          expect(answer.status).toBe(400)
          expect(answer.body.error).toBe("invalid_request")
          expect(answer.body.error_description).toMatch(/header|headers/)
        }
        for (const timeout_ms of [99, 60_001, 1.5]) {
          const answer = yield* admin.put(fixture.servicePath, {
            name: "billing",
            auth_type: "oauth",
            handler: { type: "proxy", url: upstream.url(key), timeout_ms }
          })
          expect([answer.status, answer.body.error]).toEqual([400, "invalid_request"])
        }
      }))
  })
})

describeWithPostgres("static headers at rest (PostgreSQL)", () => {
  // A database of its own: the export needs the digest key the test layer holds in memory stored.
  layer(makeTestServer({ storage: isolatedPostgresStorage() }))((it) => {
    it.effect("values are stored sealed, exported sealed, and still reach the upstream", () =>
      Effect.gen(function*() {
        const secret = `stored-${Math.random().toString(36).slice(2)}-secret`
        const { fixture, key, token } = yield* proxyService({ headers: { "X-Api-Key": secret } })
        expect((yield* throughLane(fixture, token)).status).toBe(200)
        expect((yield* upstream.received(key))[0]!.headers["x-api-key"]).toBe(secret)

        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO server_keys (name, value, created_at)
                   VALUES ('credential_digest_key', ${Buffer.alloc(32, 7).toString("base64url")}, now())`
        const [row] = yield* sql<{ handler: string }>`SELECT handler::text AS handler FROM services WHERE uuid = ${fixture.uuid}`
        expect(row!.handler).not.toContain(secret)
        expect(JSON.parse(row!.handler).headers["X-Api-Key"]).toMatch(/^enc:v1:/)
        const exported = JSON.stringify(yield* exportDatabase())
        expect(exported).toContain(fixture.uuid)
        expect(exported).not.toContain(secret)
      }).pipe(Effect.orDie))
  })
})
