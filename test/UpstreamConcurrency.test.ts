/**
 * A proxy service in front of a real upstream (docs/contract.md §2, "Proxy services"): the
 * concurrency limit, whose slot a caller that disconnects gives back at once on either entry (the
 * app's entry, where a chunked body goes, decides as the fast lane does).
 */
import { HttpClientRequest } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { request as httpRequest } from "node:http"
import { type Fixture, makeTestServer, send, serverPort } from "../src/testing.js"
import { callPath } from "./support/Tokens.js"
import {
  FAILING,
  callThroughApp,
  eventually,
  proxyService,
  startUpstream,
  stopUpstream,
  throughLane,
  upstream
} from "./support/UpstreamGateway.js"

beforeAll(startUpstream)

afterAll(stopUpstream)

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
