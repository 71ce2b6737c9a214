/**
 * A proxy service in front of a real upstream (docs/contract.md §2, "Proxy services"): one upstream
 * process per file (`support/RecordingUpstream.mjs`) records what it receives and answers as told.
 *
 * - what the upstream receives: the identity headers, an assertion that verifies with jose against
 *   the JWKS, the static headers, and nothing else of the caller's (a forged X-Client-Id included);
 * - the upstream's 400/404/409/422/429 JSON objects passed on, everything else a 502;
 * - the circuit breaker (opening after 5 failures, one trial after each pause, 10 → 20 → 40 → 60 s,
 *   closing on success) on the layer's TestClock, and the concurrency limit, whose slot a caller
 *   that disconnects gives back at once on either entry;
 * - static header values: never in an admin answer or the audit trail, kept or replaced as documented;
 * - the app's entry (a chunked body goes to the HttpApi handler) decides as the fast lane does.
 */
import { HttpClientRequest } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Fiber, TestClock } from "effect"
import * as Jose from "jose"
import { type ChildProcess, spawn } from "node:child_process"
import { request as httpRequest } from "node:http"
import { fileURLToPath } from "node:url"
import { callThroughApp as callAppEntry } from "./support/AppEntry.js"
import { admin, createFixture, type Fixture, issueToken, type JsonResponse, makeTestServer, send, serverPort } from "../src/testing.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { describeWithPostgres, isolatedPostgresStorage } from "./support/Databases.js"
import { callPath, callService, expectServiceError } from "./support/Tokens.js"

// ---------------------------------------------------------------------------------------------
// The upstream process

let child: ChildProcess | undefined
let upstreamPort = 0

beforeAll(async () => {
  child = spawn(process.execPath, [fileURLToPath(new URL("./support/RecordingUpstream.mjs", import.meta.url))], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  upstreamPort = await new Promise<number>((resolve, reject) => {
    child!.stdout!.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())))
    child!.once("exit", () => reject(new Error("the upstream exited")))
  })
})
afterAll(() => {
  child?.kill("SIGTERM")
})

interface Received {
  readonly method: string
  readonly headers: Record<string, string>
  readonly body: string
}
interface Mode {
  readonly status?: number
  readonly body?: unknown
  readonly text?: string
  readonly retryAfter?: string
  readonly hold?: boolean
  readonly drop?: boolean
}

const control = (method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${upstreamPort}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return response.json() as Promise<any>
  })

const upstream = {
  url: (key: string) => `http://127.0.0.1:${upstreamPort}/svc/${key}`,
  mode: (key: string, mode: Mode) => control("PUT", `/__mode/${key}`, mode),
  received: (key: string) => control("GET", `/__received/${key}`) as Effect.Effect<Array<Received>>,
  held: (key: string) => Effect.map(control("GET", `/__held/${key}`), (answer) => answer.held as number),
  release: (key: string) => control("POST", `/__release/${key}`)
}

/** Waits (without a fixed sleep) until `check` holds. */
const eventually = <A>(read: Effect.Effect<A>, check: (value: A) => boolean) =>
  Effect.promise(async () => {
    for (let attempt = 0; attempt < 400; attempt++) {
      const value = await Effect.runPromise(read)
      if (check(value)) return value
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    throw new Error("condition not reached")
  })

// ---------------------------------------------------------------------------------------------
// Services and calls

let keys = 0
const freshKey = () => `k${process.pid}-${++keys}`

const proxyService = (handler: Record<string, unknown> = {}, authType: "oauth" | "none" = "oauth") =>
  Effect.gen(function*() {
    const key = freshKey()
    const stored = { type: "proxy", url: upstream.url(key), ...handler }
    const fixture = yield* createFixture({ handler: stored })
    // createFixture makes an oauth service (to add its credential), then switches.
    if (authType === "none") yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "none", handler: stored })
    const token = authType === "oauth" ? yield* issueToken(fixture) : undefined
    return { key, fixture, token }
  })

/** A raw service call's request options: a chunked body is never the fast lane's, but the app's. */
const callOptions = (port: number, fixture: Fixture, token: string | undefined, headers: Record<string, string>) => ({
  host: "127.0.0.1",
  port,
  method: "POST",
  path: callPath(fixture),
  headers: {
    "content-type": "application/json",
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    ...headers
  }
})

/** A service call through the HttpApi app. */
const callThroughApp = (fixture: Fixture, token: string | undefined, body = "{}", headers: Record<string, string> = {}) =>
  callAppEntry(callPath(fixture), token, headers, body)

type Caller = (fixture: Fixture, token: string | undefined, body?: string, headers?: Record<string, string>) => Effect.Effect<JsonResponse, never, any>
const throughLane: Caller = (fixture, token, body = "{}", headers = {}) =>
  callService(callPath(fixture), { token, body, headers })
const ENTRIES: ReadonlyArray<readonly [string, Caller]> = [["fast lane", throughLane], ["app", callThroughApp]]

const FAILING = { error: "temporarily_unavailable", error_description: "The upstream service is failing; retry later" }

const jwks = Effect.map(send(HttpClientRequest.get("/.well-known/jwks.json")), (response) => Jose.createLocalJWKSet(response.body))

/**
 * The headers any HTTP client adds on its own, besides the gateway's, and the trace context (the
 * tests' runtime has its tracer on; production only while traces are exported).
 */
const TRANSPORT = new Set(["host", "connection", "content-length", "traceparent"])

// ---------------------------------------------------------------------------------------------

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
          yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: upstream.url(key), timeout_ms: 5000 } })
        ]
        for (const answer of answers) expect(answer.text).not.toContain(secret)
        expect(answers[4]!.body.handler).toEqual({ type: "proxy", url: upstream.url(key), timeout_ms: 5000, headers: ["Authorization", "X-Api-Key"] })
        yield* throughLane(fixture, token)
        expect((yield* upstream.received(key))[1]!.headers["x-api-key"]).toBe(secret)

        // An object replaces them all; {} removes them.
        yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: upstream.url(key), headers: { "X-Other": "v2" } } })
        yield* throughLane(fixture, token)
        const third = (yield* upstream.received(key))[2]!.headers
        expect([third["x-other"], third["x-api-key"]]).toEqual(["v2", undefined])
        const removed = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: upstream.url(key), headers: {} } })
        expect(removed.body.handler).toEqual({ type: "proxy", url: upstream.url(key) })
      }))

    it.effect("static headers that cannot be: 400 invalid_request naming the problem", () =>
      Effect.gen(function*() {
        const { fixture, key } = yield* proxyService()
        const put = (headers: unknown) =>
          admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: upstream.url(key), headers } })
        const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, "v"]))
        for (const headers of [{ Host: "x" }, { "X-Client-Id": "x" }, { "Content-Length": "1" }, { Connection: "close" }, { "bad name": "x" }, { "X-Ok": "line\r\nbreak" }, eleven, ["X-Never-Stored"]]) {
          const answer = yield* put(headers)
          expect(answer.status).toBe(400)
          expect(answer.body.error).toBe("invalid_request")
          expect(answer.body.error_description).toMatch(/header|headers/)
        }
        for (const timeout_ms of [99, 60_001, 1.5]) {
          const answer = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: upstream.url(key), timeout_ms } })
          expect([answer.status, answer.body.error]).toEqual([400, "invalid_request"])
        }
      }))
  })
})

describe("upstream answers", () => {
  layer(makeTestServer())((it) => {
    for (const [entry, call] of ENTRIES) {
      it.effect(`${entry}: 400, 404, 409, 422 and 429 with a JSON object are passed on`, () =>
        Effect.gen(function*() {
          const { fixture, key, token } = yield* proxyService()
          for (const status of [400, 404, 409, 422, 429]) {
            const body = { problem: `status ${status}`, fields: ["amount"] }
            yield* upstream.mode(key, { status, body, ...(status === 429 ? { retryAfter: "7" } : {}) })
            const response = yield* call(fixture, token)
            expect({ status: response.status, body: response.body }).toEqual({ status, body })
            expect(response.headers["retry-after"]).toBe(status === 429 ? "7" : undefined)
          }
        }))

      it.effect(`${entry}: other statuses, bodies that are not objects, drops and timeouts are 502`, () =>
        Effect.gen(function*() {
          const { fixture, key, token } = yield* proxyService({ timeout_ms: 100 })
          const modes: Array<Mode> = [
            { status: 500, body: { error: "boom" } },
            { status: 401, body: { error: "no" } },
            { status: 404, text: "[1,2]" },
            { status: 422, text: "not json" },
            { status: 200, text: "\"text\"" },
            { drop: true },
            { hold: true }
          ]
          for (const mode of modes) {
            yield* upstream.mode(key, mode)
            expectServiceError(yield* call(fixture, token), 502, "bad_gateway")
          }
          yield* upstream.release(key)
        }))
    }
  })
})

describe("circuit breaker", () => {
  layer(makeTestServer())((it) => {
    it.effect("opens after 5 failures, lets one trial through after 10, 20, 40, 60, 60 s, closes on success", () =>
      Effect.gen(function*() {
        const { fixture, key, token } = yield* proxyService()
        yield* upstream.mode(key, { status: 503, body: { error: "down" } })
        for (let i = 0; i < 5; i++) expectServiceError(yield* throughLane(fixture, token), 502, "bad_gateway")
        const refused = yield* throughLane(fixture, token)
        expect({ status: refused.status, body: refused.body, retryAfter: refused.headers["retry-after"] })
          .toEqual({ status: 503, body: FAILING, retryAfter: "10" })
        // Refused on the app's entry too, and the upstream was not called.
        expect((yield* callThroughApp(fixture, token)).status).toBe(503)
        expect((yield* upstream.received(key)).length).toBe(5)

        for (const pause of [10, 20, 40, 60, 60]) {
          yield* TestClock.adjust(`${pause - 1} seconds`)
          expect((yield* throughLane(fixture, token)).status).toBe(503)
          yield* TestClock.adjust("1 second")
          // The trial call: it fails, and the next pause doubles (at most 60 s).
          expectServiceError(yield* throughLane(fixture, token), 502, "bad_gateway")
          const next = yield* throughLane(fixture, token)
          expect([next.status, next.headers["retry-after"]]).toEqual([503, String(Math.min(pause * 2, 60))])
        }
        expect((yield* upstream.received(key)).length).toBe(10)

        yield* upstream.mode(key, { status: 200, body: { back: true } })
        yield* TestClock.adjust("60 seconds")
        expect((yield* throughLane(fixture, token)).body).toEqual({ back: true })
        expect((yield* callThroughApp(fixture, token)).body).toEqual({ back: true })
        const metrics = (yield* send(HttpClientRequest.get("/metrics"))).text
        expect(metrics).toMatch(/service_auth_upstream_calls_total\{outcome="open"\} [1-9]/)
        expect(metrics).toMatch(/service_auth_upstream_calls_total\{outcome="bad_gateway"\} [1-9]/)
        expect(metrics).toContain("service_auth_upstream_open_breakers")
        expect(metrics).not.toContain(String(upstreamPort))
      }))

    it.effect("passed-on answers are not failures; one trial at a time while it is on its way", () =>
      Effect.gen(function*() {
        const { fixture, key, token } = yield* proxyService()
        yield* upstream.mode(key, { status: 422, body: { invalid: true } })
        for (let i = 0; i < 6; i++) expect((yield* throughLane(fixture, token)).status).toBe(422)
        yield* upstream.mode(key, { drop: true })
        for (let i = 0; i < 5; i++) expect((yield* throughLane(fixture, token)).status).toBe(502)
        expect((yield* throughLane(fixture, token)).status).toBe(503)
        yield* upstream.mode(key, { hold: true })
        yield* TestClock.adjust("10 seconds")
        const trial = yield* Effect.fork(throughLane(fixture, token))
        yield* eventually(upstream.held(key), (held) => held === 1)
        const meanwhile = yield* throughLane(fixture, token)
        expect([meanwhile.status, meanwhile.headers["retry-after"]]).toEqual([503, "1"])
        yield* upstream.release(key)
        expect((yield* Fiber.join(trial)).status).toBe(200)
      }))
  })
})

describe("concurrency limit (UPSTREAM_MAX_CONCURRENCY 2)", () => {
  layer(makeTestServer({ config: { upstreamMaxConcurrency: 2 } }))((it) => {
    it.effect("a call beyond the limit is refused with 503 and Retry-After: 1; the others complete", () =>
      Effect.gen(function*() {
        const { fixture, key, token } = yield* proxyService()
        yield* upstream.mode(key, { hold: true })
        const first = yield* Effect.fork(throughLane(fixture, token))
        const second = yield* Effect.fork(callThroughApp(fixture, token))
        yield* eventually(upstream.held(key), (held) => held === 2)
        const refused = yield* throughLane(fixture, token)
        expect({ status: refused.status, body: refused.body, retryAfter: refused.headers["retry-after"] })
          .toEqual({ status: 503, body: FAILING, retryAfter: "1" })
        yield* upstream.release(key)
        expect([(yield* Fiber.join(first)).status, (yield* Fiber.join(second)).status]).toEqual([200, 200])
        const metrics = (yield* send(HttpClientRequest.get("/metrics"))).text
        expect(metrics).toMatch(/service_auth_upstream_calls_total\{outcome="saturated"\} [1-9]/)
      }))
  })
})

/** A service call sent in full whose caller can leave before the answer; chunked goes to the app. */
const leavingCall = (port: number, fixture: Fixture, token: string | undefined, chunked: boolean) => {
  const body = "{}"
  const outgoing = httpRequest(
    callOptions(port, fixture, token, chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(body.length) })
  )
  outgoing.on("error", () => {})
  outgoing.end(body)
  return outgoing
}

describe("a caller that leaves (UPSTREAM_MAX_CONCURRENCY 2)", () => {
  layer(makeTestServer({ config: { upstreamMaxConcurrency: 2 } }))((it) => {
    for (const [entry, chunked] of [["fast lane", false], ["app", true]] as const) {
      it.effect(`${entry}: its upstream call is aborted at once, and its slot goes to the next call`, () =>
        Effect.gen(function*() {
          // The upstream's own timeout far away: only the caller's leaving can end these calls.
          const { fixture, key, token } = yield* proxyService({ timeout_ms: 60_000 })
          yield* upstream.mode(key, { hold: true })
          const port = yield* serverPort
          const callers = [leavingCall(port, fixture, token, chunked), leavingCall(port, fixture, token, chunked)]
          yield* eventually(upstream.held(key), (held) => held === 2)
          for (const caller of callers) caller.destroy()
          // Well before the upstream timeout: the gateway closed both upstream calls.
          yield* eventually(upstream.held(key), (held) => held === 0)
          yield* upstream.mode(key, {})
          const next = yield* throughLane(fixture, token)
          expect(next.status).toBe(200)
        }))
    }
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
