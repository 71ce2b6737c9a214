/**
 * Brute-force protection of client authentication (RFC 6749 §2.3.1): after
 * AUTH_FAILURE_LIMIT failed client authentications for one client id from one remote address
 * within a minute, that pair is answered 429 with `Retry-After` and
 * `{"error":"invalid_client","error_description":"Too many failed authentication attempts"}` until
 * the window is over. Another client id, or the same client id from another address, is never
 * refused because of those failures.
 *
 * The in-process server runs on the layer's TestClock (`layer(...)` provides the test services to
 * the layer it builds), so `TestClock.adjust` moves the limiter's window without waiting.
 * Requests from the typed HTTP client come from 127.0.0.1; requests bound to 127.0.0.2 (all of
 * 127/8 is loopback on Linux) play "another address".
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { FAILURE_WINDOW_MS, makeAuthFailureLimiter } from "../src/token/AuthFailureLimiter.js"
import type { FailureCountsShape } from "../src/token/FailureCounts.js"
import { asJsonResponse, basicAuthorization, formEncode, oauthError, rawRequest } from "./support/Http.js"
import {
  admin,
  createFixture,
  type Fixture,
  type JsonResponse,
  makeTestServer,
  serverPort,
  tokenRequest,
  uniqueName
} from "../src/testing.js"

const LIMIT = 5

const TOO_MANY = {
  error: "invalid_client",
  error_description: "Too many failed authentication attempts"
} as const
const INVALID_CLIENT = oauthError("invalid_client", "Invalid client credentials")

const wrongSecret = () => `wrong-${randomBytes(12).toString("base64url")}`

const without = (fields: Record<string, string>, ...names: ReadonlyArray<string>) =>
  Object.fromEntries(Object.entries(fields).filter(([name]) => !names.includes(name)))

const expectInvalidClient = (response: JsonResponse) =>
  expect({ status: response.status, body: response.body }).toEqual({ status: 401, body: INVALID_CLIENT })

const expectToken = (response: JsonResponse) =>
  expect({ status: response.status, tokenType: response.body?.token_type }).toEqual({ status: 200, tokenType: "Bearer" })

/** 429, the exact body, no caching, and `Retry-After` in whole seconds within the window; returns it. */
const expectTooMany = (response: JsonResponse): number => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 429, body: TOO_MANY })
  expect(response.text).toBe(JSON.stringify(TOO_MANY))
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["pragma"]).toBe("no-cache")
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
  const retryAfter = response.headers["retry-after"]
  expect(retryAfter).toMatch(/^[0-9]+$/)
  const seconds = Number(retryAfter)
  expect(seconds).toBeGreaterThanOrEqual(1)
  expect(seconds).toBeLessThanOrEqual(60)
  return seconds
}

/** `count` wrong-secret requests for the fixture's client id (client_secret_post), each answered 401. */
const fail = (fixture: Fixture, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < count; i++) {
      expectInvalidClient(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret() }))
    }
  })

/** A second live credential on the fixture's service. */
const secondCredential = (fixture: Fixture) =>
  Effect.map(admin.post(`${fixture.servicePath}/credentials`), (response) => {
    expect(response.status).toBe(201)
    return {
      ...fixture,
      clientId: response.body.client_id as string,
      clientSecret: response.body.client_secret as string,
      tokenFields: {
        ...fixture.tokenFields,
        client_id: response.body.client_id as string,
        client_secret: response.body.client_secret as string
      }
    } satisfies Fixture
  })

/**
 * A token request from a chosen local address (node:http with `localAddress`), to the in-process
 * server's port. The typed client cannot choose its source address.
 */
const tokenRequestFrom = (localAddress: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      rawRequest(port, {
        method: "POST",
        path: "/oauth/token",
        localAddress,
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        body: Object.entries(fields).map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")
      })
    )).pipe(Effect.map(asJsonResponse))

// One `layer(...)` per describe block (in @effect/vitest 0.30 a second `it.layer` would nest).
describe(`brute force over HTTP (AUTH_FAILURE_LIMIT=${LIMIT})`, () => {
  layer(makeTestServer({ config: { authFailureLimit: LIMIT } }))((it) => {
    it.effect("LIMIT wrong secrets → 401 each; the next request, even with the right secret → 429", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, LIMIT)
        const refused = yield* tokenRequest(fixture.tokenFields)
        expect(expectTooMany(refused)).toBe(60) // the TestClock has not moved since the first failure
        // Still refused, wrong secret or right one.
        expectTooMany(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret() }))
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("client_secret_basic: failures count and the blocked pair gets 429 through Basic too", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const target = without(fixture.tokenFields, "client_id", "client_secret")
        for (let i = 0; i < LIMIT; i++) {
          const response = yield* tokenRequest(target, { authorization: basicAuthorization(fixture.clientId, wrongSecret()) })
          expectInvalidClient(response)
          expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
        }
        expectTooMany(yield* tokenRequest(target, { authorization: basicAuthorization(fixture.clientId, fixture.clientSecret) }))
        // The pair is the client id, whichever method presents it.
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("failures through post and Basic add up for one pair", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const target = without(fixture.tokenFields, "client_id", "client_secret")
        yield* fail(fixture, LIMIT - 2)
        for (let i = 0; i < 2; i++) {
          expectInvalidClient(yield* tokenRequest(target, { authorization: basicAuthorization(fixture.clientId, wrongSecret()) }))
        }
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("LIMIT - 1 failures do not block: the right secret still gets a token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, LIMIT - 1)
        expectToken(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("a success does not reset the count: LIMIT failures within the window block, successes between them or not", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, LIMIT - 1)
        expectToken(yield* tokenRequest(fixture.tokenFields))
        yield* fail(fixture, 1)
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("another client id from the same address is not affected", () =>
      Effect.gen(function*() {
        const first = yield* createFixture()
        const second = yield* secondCredential(first)
        yield* fail(first, LIMIT)
        expectTooMany(yield* tokenRequest(first.tokenFields))
        // The other credential of the same service, from the same address.
        expectToken(yield* tokenRequest(second.tokenFields))
        // And its own failures start from zero: LIMIT - 1 of them still leave it working.
        yield* fail(second, LIMIT - 1)
        expectToken(yield* tokenRequest(second.tokenFields))
        // A client of another profile is not affected either.
        const other = yield* createFixture()
        expectToken(yield* tokenRequest(other.tokenFields))
      }))

    it.effect("an unknown client id is counted like a wrong secret, for that id only", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const unknown = `svc_${randomBytes(16).toString("hex")}`
        for (let i = 0; i < LIMIT; i++) {
          expectInvalidClient(yield* tokenRequest({ ...fixture.tokenFields, client_id: unknown, client_secret: wrongSecret() }))
        }
        expectTooMany(yield* tokenRequest({ ...fixture.tokenFields, client_id: unknown, client_secret: wrongSecret() }))
        expectToken(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("failures of rows 1-4 (before client authentication) do not count", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const bad = { ...fixture.tokenFields, client_secret: wrongSecret() }
        const rounds = LIMIT + 2
        for (let i = 0; i < rounds; i++) {
          // Row 1: grant_type missing.
          expect((yield* tokenRequest(without(bad, "grant_type"))).status).toBe(400)
          // Row 2: unsupported grant.
          expect((yield* tokenRequest({ ...bad, grant_type: "password" })).status).toBe(400)
          // Row 3: secret or target field missing.
          expect((yield* tokenRequest(without(bad, "client_secret"))).status).toBe(400)
          expect((yield* tokenRequest(without(bad, "profile"))).status).toBe(400)
          // Row 4: unknown profile, environment not in the profile, unknown service.
          expect((yield* tokenRequest({ ...bad, profile: uniqueName("nowhere") })).status).toBe(400)
          expect((yield* tokenRequest({ ...bad, environment: "staging" })).status).toBe(400)
          expect((yield* tokenRequest({ ...bad, service_uuid: "00000000-0000-4000-8000-000000000000" })).status).toBe(400)
        }
        expectToken(yield* tokenRequest(fixture.tokenFields))
        // Row 4 also covers a service whose auth_type is not oauth.
        const open = yield* createFixture({ authType: "none" })
        for (let i = 0; i < rounds; i++) {
          expect((yield* tokenRequest({ ...open.tokenFields, client_secret: wrongSecret() })).status).toBe(400)
        }
        yield* admin.put(open.servicePath, { name: "billing", auth_type: "oauth" })
        expectToken(yield* tokenRequest(open.tokenFields))
      }))

    it.effect("Retry-After counts down and the pair is refused until the minute since its first failure is over", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, 1)
        yield* TestClock.adjust("20 seconds")
        yield* fail(fixture, LIMIT - 1)
        // Blocked; the window opened with the first failure, 20 s ago.
        expect(expectTooMany(yield* tokenRequest(fixture.tokenFields))).toBe(40)
        yield* TestClock.adjust("29500 millis")
        // 10.5 s left: whole seconds, rounded up.
        expect(expectTooMany(yield* tokenRequest(fixture.tokenFields))).toBe(11)
        yield* TestClock.adjust("10 seconds")
        expect(expectTooMany(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret() }))).toBe(1)
        // Refused attempts did not extend the window: once it has passed, the right secret works.
        yield* TestClock.adjust("500 millis")
        expectToken(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("after the window a new one starts: LIMIT more failures are needed to block again", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, LIMIT)
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
        yield* TestClock.adjust("61 seconds")
        // Fresh window: LIMIT - 1 failures are answered 401 and leave the right secret working.
        yield* fail(fixture, LIMIT - 1)
        expectToken(yield* tokenRequest(fixture.tokenFields))
        yield* fail(fixture, 1)
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("failures spread over more than a minute never add up to a block", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        for (let round = 0; round < 3; round++) {
          yield* fail(fixture, LIMIT - 1)
          yield* TestClock.adjust("61 seconds")
        }
        expectToken(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("another address with the right secret is never refused because of 127.0.0.1's failures", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, LIMIT)
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
        // Same client id, same right secret, from 127.0.0.2: a token.
        expectToken(yield* tokenRequestFrom("127.0.0.2", fixture.tokenFields))
        // Through Basic as well.
        const target = without(fixture.tokenFields, "client_id", "client_secret")
        expectToken(
          yield* tokenRequestFrom("127.0.0.2", target, { authorization: basicAuthorization(fixture.clientId, fixture.clientSecret) })
        )
        // 127.0.0.1 is still refused.
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))

    it.effect("each address has its own count: the attacker's address is blocked, the client's is not", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        // The attacker at 127.0.0.2 exhausts its allowance...
        for (let i = 0; i < LIMIT; i++) {
          expectInvalidClient(yield* tokenRequestFrom("127.0.0.2", { ...fixture.tokenFields, client_secret: wrongSecret() }))
        }
        expectTooMany(yield* tokenRequestFrom("127.0.0.2", fixture.tokenFields))
        // ...the legitimate client at 127.0.0.1 carries on, with LIMIT - 1 failures of its own to spare.
        expectToken(yield* tokenRequest(fixture.tokenFields))
        yield* fail(fixture, LIMIT - 1)
        expectToken(yield* tokenRequest(fixture.tokenFields))
        // And 127.0.0.3 has not been touched at all.
        expectToken(yield* tokenRequestFrom("127.0.0.3", fixture.tokenFields))
      }))
  })
})

describe("brute force over HTTP with the default AUTH_FAILURE_LIMIT (20)", () => {
  layer(makeTestServer())((it) => {
    it.effect("20 failures → 401 each; the 21st request → 429", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        yield* fail(fixture, 19)
        expectToken(yield* tokenRequest(fixture.tokenFields))
        yield* fail(fixture, 1)
        expectTooMany(yield* tokenRequest(fixture.tokenFields))
      }))
  })
})

describe("makeAuthFailureLimiter (unit, TestClock)", () => {
  it.effect("the window is one minute from the pair's first failure", () =>
    Effect.gen(function*() {
      expect(FAILURE_WINDOW_MS).toBe(60_000)
      const limiter = yield* makeAuthFailureLimiter(3)
      for (let i = 0; i < 3; i++) {
        expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.none())
        yield* limiter.recordFailure("svc_a", "10.0.0.1")
      }
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.some(60))
      yield* TestClock.adjust("59001 millis")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.some(1))
      yield* TestClock.adjust("999 millis")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.none())
    }))

  it.effect("another address, or another client id, is never blocked by a pair's failures", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(2)
      for (let i = 0; i < 50; i++) yield* limiter.recordFailure("svc_a", "10.0.0.1")
      expect(Option.isSome(yield* limiter.blockedFor("svc_a", "10.0.0.1"))).toBe(true)
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.2")).toEqual(Option.none())
      expect(yield* limiter.blockedFor("svc_b", "10.0.0.1")).toEqual(Option.none())
      // One failure elsewhere does not block.
      yield* limiter.recordFailure("svc_a", "10.0.0.2")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.2")).toEqual(Option.none())
    }))

  it.effect("failures in an expired window start a new one with count 1", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(2)
      yield* limiter.recordFailure("svc_a", "10.0.0.1")
      yield* TestClock.adjust("60 seconds")
      yield* limiter.recordFailure("svc_a", "10.0.0.1")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.none())
      yield* TestClock.adjust("30 seconds")
      yield* limiter.recordFailure("svc_a", "10.0.0.1")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.some(30))
    }))

  it.effect("concurrent failures: exactly the limit take an attempt, the rest are answered with the seconds left", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(4)
      const verdicts = yield* Effect.all(Array.from({ length: 40 }, () => limiter.recordFailure("svc_a", "10.0.0.1")), {
        concurrency: "unbounded"
      })
      expect(verdicts.filter(Option.isNone).length).toBe(4)
      expect(verdicts.filter(Option.isSome).map((left) => left.value)).toEqual(Array(36).fill(60))
    }))

  it.effect("a shared store that answers later: a success of the pair waits for its failures being counted", () =>
    Effect.gen(function*() {
      const answer = yield* Deferred.make<void>()
      // Another instance has filled the window: the store ranks this instance's failure 6th of 5.
      const store: FailureCountsShape = {
        shared: true,
        add: (_pair, now, windowMs) => Effect.as(Deferred.await(answer), Option.some({ count: 6, resetAt: now + windowMs }))
      }
      const limiter = yield* makeAuthFailureLimiter(5, store)
      const failure = yield* Effect.fork(limiter.recordFailure("svc_a", "10.0.0.1"))
      yield* Effect.yieldNow()
      expect(limiter.counting("svc_a", "10.0.0.1")).toBe(true)
      expect(limiter.counting("svc_a", "10.0.0.2")).toBe(false)
      // Not yet known to be full: a check before the credential lets it through...
      expect(limiter.blockedAt("svc_a", "10.0.0.1", 0)).toEqual(Option.none())
      // ...but its success waits for the count, and is refused by it.
      const success = yield* Effect.fork(limiter.admit("svc_a", "10.0.0.1"))
      const elsewhere = yield* limiter.admit("svc_a", "10.0.0.2")
      expect(elsewhere).toEqual(Option.none())
      yield* Deferred.succeed(answer, undefined)
      expect(yield* Fiber.join(failure)).toEqual(Option.some(60))
      expect(yield* Fiber.join(success)).toEqual(Option.some(60))
      expect(limiter.counting("svc_a", "10.0.0.1")).toBe(false)
    }))

  it.effect("a shared store that cannot be reached: the instance counts on its own, exactly", () =>
    Effect.gen(function*() {
      const unreachable: FailureCountsShape = { shared: true, add: () => Effect.succeedNone }
      const limiter = yield* makeAuthFailureLimiter(3, unreachable)
      const verdicts = yield* Effect.all(Array.from({ length: 20 }, () => limiter.recordFailure("svc_a", "10.0.0.1")), {
        concurrency: "unbounded"
      })
      expect(verdicts.filter(Option.isNone).length).toBe(3)
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.some(60))
    }))

  it.effect("a limit of 1 blocks after a single failure", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(1)
      yield* limiter.recordFailure("svc_a", "10.0.0.1")
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.1")).toEqual(Option.some(60))
      expect(yield* limiter.blockedFor("svc_a", "10.0.0.2")).toEqual(Option.none())
    }))
})
