/**
 * Per-client rate limits of services, through the real HttpApi on the server's clock
 * (TestClock): each client of a limited service gets `requests` calls per `per_seconds` seconds,
 * then `429 rate_limited` with Retry-After; every answer of the service carries the IETF draft's
 * `RateLimit-Policy` and `RateLimit`; other clients and other services are untouched; the window
 * resets; both entries (the fast lane and the app) count the same calls.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { makeRateLimits } from "../src/service-call/RateLimits.js"
import { admin, createFixture, type Fixture, fixtureOf, issueToken, type JsonResponse, makeTestServer } from "../src/testing.js"
import { callThroughApp } from "./support/AppEntry.js"
import { callPath, callService, expectEcho } from "./support/Tokens.js"

const LIMIT = { requests: 2, per_seconds: 10 }
const POLICY = `"default";q=2;w=10`
const REFUSED = {
  error: "rate_limited",
  error_description: "Too many calls: this service allows each client 2 calls per 10 seconds"
}

/** A fixture whose service has `LIMIT`, and a second credential (another client) on it. */
const limitedService = (authType: "oauth" | "none" = "oauth") =>
  Effect.gen(function*() {
    const fixture = yield* createFixture()
    const set = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: authType, rate_limit: LIMIT })
    expect(set.status).toBe(200)
    expect(set.body.rate_limit).toEqual(LIMIT)
    const other = authType === "oauth" ? fixtureOf(fixture, (yield* admin.post(`${fixture.servicePath}/credentials`)).body) : fixture
    return { fixture, other }
  })

const expectAllowed = (response: JsonResponse, fixture: Fixture, clientId: string | null, remaining: number, reset: number) => {
  expectEcho(response, fixture, clientId)
  expect(response.headers["ratelimit-policy"]).toBe(POLICY)
  expect(response.headers["ratelimit"]).toBe(`"default";r=${remaining};t=${reset}`)
}

const expectLimited = (response: JsonResponse, reset: number) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 429, body: REFUSED })
  expect(response.headers["retry-after"]).toBe(String(reset))
  expect(response.headers["ratelimit-policy"]).toBe(POLICY)
  expect(response.headers["ratelimit"]).toBe(`"default";r=0;t=${reset}`)
  expect(response.headers["www-authenticate"]).toBeUndefined()
}

layer(makeTestServer(), { timeout: 60_000 })("rate limits", (it) => {
  it.effect("per client: one client is throttled with exact headers while another of the same service is untouched", () =>
    Effect.gen(function*() {
      const { fixture, other } = yield* limitedService()
      const token = yield* issueToken(fixture)
      const otherToken = yield* issueToken(other)
      expectAllowed(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId, 1, 10)
      yield* TestClock.adjust("3 seconds")
      expectAllowed(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId, 0, 7)
      expectLimited(yield* callService(callPath(fixture), { token }), 7)
      // A refused call is not counted, and the other client has its own window.
      expectAllowed(yield* callService(callPath(other), { token: otherToken }), other, other.clientId, 1, 10)
      expectAllowed(yield* callService(callPath(other), { token: otherToken }), other, other.clientId, 0, 10)
      expectLimited(yield* callService(callPath(other), { token: otherToken }), 10)

      // The window resets.
      yield* TestClock.adjust("7 seconds")
      expectAllowed(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId, 1, 10)
      expectLimited(yield* callService(callPath(other), { token: otherToken }), 3)
    }))

  it.effect("per service: a service without a limit answers as it always did; another limited service counts apart", () =>
    Effect.gen(function*() {
      const { fixture } = yield* limitedService()
      const free = yield* createFixture()
      const token = yield* issueToken(free)
      for (let call = 0; call < 5; call++) {
        const response = yield* callService(callPath(free), { token })
        expectEcho(response, free, free.clientId)
        expect(Object.keys(response.headers).filter((name) => name.startsWith("ratelimit"))).toEqual([])
      }
      const second = yield* limitedService()
      const limitedToken = yield* issueToken(fixture)
      expectAllowed(yield* callService(callPath(fixture), { token: limitedToken }), fixture, fixture.clientId, 1, 10)
      expectAllowed(
        yield* callService(callPath(second.fixture), { token: yield* issueToken(second.fixture) }),
        second.fixture,
        second.fixture.clientId,
        1,
        10
      )
      // Removing the limit removes the headers.
      const cleared = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", rate_limit: null })
      expect(cleared.body.rate_limit).toBeUndefined()
      const after = yield* callService(callPath(fixture), { token: limitedToken })
      expectEcho(after, fixture, fixture.clientId)
      expect(after.headers["ratelimit"]).toBeUndefined()
    }))

  it.effect("both entries count the same calls: the fast lane and the app (a chunked body)", () =>
    Effect.gen(function*() {
      const { fixture } = yield* limitedService()
      const token = yield* issueToken(fixture)
      expectAllowed(yield* callThroughApp(callPath(fixture), token), fixture, fixture.clientId, 1, 10)
      expectAllowed(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId, 0, 10)
      expectLimited(yield* callThroughApp(callPath(fixture), token), 10)
      expectLimited(yield* callService(callPath(fixture), { token }), 10)
      // Every answer of the service carries the fields: a body that is not a JSON object too.
      yield* TestClock.adjust("10 seconds")
      const bad = yield* callService(callPath(fixture), { token, body: "[]" })
      expect(bad.status).toBe(400)
      expect(bad.headers["ratelimit"]).toBe(`"default";r=1;t=10`)
    }))

  it.effect("a service without OAuth counts each client address", () =>
    Effect.gen(function*() {
      const { fixture } = yield* limitedService("none")
      expectAllowed(yield* callService(callPath(fixture)), fixture, null, 1, 10)
      expectAllowed(yield* callThroughApp(callPath(fixture), undefined), fixture, null, 0, 10)
      expectLimited(yield* callService(callPath(fixture)), 10)
    }))

  it.effect("a rate limit out of range is refused", () =>
    Effect.gen(function*() {
      const fixture = yield* createFixture()
      for (const rateLimit of [{ requests: 0, per_seconds: 1 }, { requests: 1, per_seconds: 3601 }, { requests: 1 }]) {
        const response = yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", rate_limit: rateLimit })
        expect({ status: response.status, error: response.body.error }).toEqual({ status: 400, error: "invalid_request" })
      }
    }))
})

describe("RateLimits memory", () => {
  it("holds at most its capacity of windows, evicting the one started longest ago", () => {
    const limits = makeRateLimits(3)
    const address = { profile: "p", environment: "e", uuid: "u" } as never
    for (const client of ["a", "b", "c", "d"]) limits.admit(address, { requests: 1, per_seconds: 60 }, client, 0)
    expect(limits.size()).toBe(3)
    // "a" was evicted: it starts afresh; "d" is still held and refused.
    expect(limits.admit(address, { requests: 1, per_seconds: 60 }, "a", 1).allowed).toBe(true)
    expect(limits.admit(address, { requests: 1, per_seconds: 60 }, "d", 1).allowed).toBe(false)
  })
})
