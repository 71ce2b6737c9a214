/**
 * A proxy service in front of a real upstream (docs/contract.md §2, "Proxy services"): what the
 * caller gets back. The upstream's 400/404/409/422/429 JSON objects passed on, everything else a 502;
 * the circuit breaker (opening after 5 failures, one trial after each pause, 10 → 20 → 40 → 60 s,
 * closing on success) on the layer's TestClock.
 */
import { HttpClientRequest } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { makeTestServer, send } from "../src/testing.js"
import { expectServiceError } from "./support/Tokens.js"
import {
  ENTRIES,
  FAILING,
  Mode,
  callThroughApp,
  eventually,
  proxyService,
  startUpstream,
  stopUpstream,
  throughLane,
  upstream,
  upstreamPort
} from "./support/UpstreamGateway.js"

beforeAll(startUpstream)

afterAll(stopUpstream)

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
