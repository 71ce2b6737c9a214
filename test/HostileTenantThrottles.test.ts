/**
 * The failure throttles under an attacker's parallel guesses (docs/contract.md §1 and §3): however
 * many wrong credentials arrive at once, exactly AUTH_FAILURE_LIMIT of them are answered 401 (told
 * they are wrong) and every other one 429 with `Retry-After`, for client secrets (one (client id,
 * address) pair, over the token endpoint and revocation) and admin tokens (one address, over the
 * admin API and introspection). Then the right credential from that address is refused too, and
 * another address is not. On memory, the embedded database and PostgreSQL, in process; two real
 * instances on one PostgreSQL database are MultiInstanceThrottles.test.ts.
 *
 * Each case attacks from an address of its own in 127/8 (all loopback on Linux), so that runs and
 * other files sharing the PostgreSQL database never add to its counts.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer, TestClock } from "effect"
import { randomBytes, randomInt } from "node:crypto"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { basicAuthorization, formEncode, type RawResponse, rawRequest } from "./support/Http.js"
import { ADMIN_TOKEN, createFixture, type Fixture, makeTestServer, serverPort, type TestStorage } from "../src/testing.js"

const LIMIT = 5
const PARALLEL = 60

const CLIENT_REFUSED = { error: "invalid_client", error_description: "Too many failed authentication attempts" }
const CLIENT_WRONG = { error: "invalid_client", error_description: "Invalid client credentials" }
const ADMIN_REFUSED = {
  error: "too_many_attempts",
  error_description: "Too many failed admin authentication attempts from this address; retry later"
}
const ADMIN_WRONG = { error: "unauthorized", error_description: "The admin token is not valid" }

/** An address of 127/8 no other case uses. */
const attackerAddress = () => `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`
const wrong = () => `wrong-${randomBytes(12).toString("base64url")}`
const form = (fields: Record<string, string>) =>
  Object.entries(fields).map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")

type Send = (port: number, from: string) => Promise<RawResponse>

/** All of `attempts` at once, each on its own connection from `from`. */
const inParallel = (from: string, attempts: ReadonlyArray<Send>) =>
  Effect.flatMap(serverPort, (port) => Effect.promise(() => Promise.all(attempts.map((send) => send(port, from)))))

/** Exactly LIMIT answers `wrong` (401), every other `refused` (429 with Retry-After within the minute). */
const expectExactlyLimitEvaluated = (
  answers: ReadonlyArray<RawResponse>,
  wrongBody: object,
  refusedBody: object
) => {
  const statuses = answers.map((answer) => answer.status)
  expect({ evaluated: statuses.filter((s) => s === 401).length, refused: statuses.filter((s) => s === 429).length })
    .toEqual({ evaluated: LIMIT, refused: answers.length - LIMIT })
  for (const answer of answers) {
    expect(JSON.parse(answer.text)).toEqual(answer.status === 401 ? wrongBody : refusedBody)
    if (answer.status === 429) {
      expect(answer.headers["retry-after"]).toMatch(/^[0-9]+$/)
      expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1)
      expect(Number(answer.headers["retry-after"])).toBeLessThanOrEqual(60)
    }
  }
}

const tokenAttempt = (fixture: Fixture, secret: string, basic = false): Send => (port, from) =>
  rawRequest(port, {
    method: "POST",
    path: "/oauth/token",
    localAddress: from,
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(basic ? { authorization: basicAuthorization(fixture.clientId, secret) } : {})
    },
    body: form(
      basic
        ? { grant_type: "client_credentials", profile: fixture.profile, environment: fixture.environment, service_uuid: fixture.uuid }
        : { ...fixture.tokenFields, client_secret: secret }
    )
  })

const revokeAttempt = (fixture: Fixture, secret: string): Send => (port, from) =>
  rawRequest(port, {
    method: "POST",
    path: "/oauth/revoke",
    localAddress: from,
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form({ token: "not-a-token", client_id: fixture.clientId, client_secret: secret })
  })

const adminAttempt = (path: string, token: string): Send => (port, from) =>
  rawRequest(port, { method: "GET", path, localAddress: from, headers: { authorization: `Bearer ${token}` } })

const introspectAttempt = (token: string): Send => (port, from) =>
  rawRequest(port, {
    method: "POST",
    path: "/oauth/introspect",
    localAddress: from,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
    body: "token=not-a-token"
  })

const times = <A>(count: number, make: (i: number) => A): ReadonlyArray<A> => Array.from({ length: count }, (_, i) => make(i))

const hostileThrottleCases = (name: string, storage: () => Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage: storage(), config: { authFailureLimit: LIMIT } }))((it) => {
    // The windows are the server's clock: today's time, so PostgreSQL's purge of old windows never meets them.
    const now = TestClock.setTime(Date.now())

    it.effect(`${name}: ${PARALLEL} wrong client secrets at once → exactly ${LIMIT} answered 401, the rest 429`, () =>
      Effect.gen(function*() {
        yield* now
        const fixture = yield* createFixture()
        const attacker = attackerAddress()
        const answers = yield* inParallel(attacker, times(PARALLEL, () => tokenAttempt(fixture, wrong())))
        expectExactlyLimitEvaluated(answers, CLIENT_WRONG, CLIENT_REFUSED)
        for (const answer of answers) expect(answer.headers["cache-control"]).toBe("no-store")
        // The pair is refused, right secret or not; the same client elsewhere is not.
        const [fromAttacker] = yield* inParallel(attacker, [tokenAttempt(fixture, fixture.clientSecret)])
        expect(fromAttacker!.status).toBe(429)
        const [elsewhere] = yield* inParallel(attackerAddress(), [tokenAttempt(fixture, fixture.clientSecret)])
        expect(elsewhere!.status).toBe(200)
      }))

    it.effect(`${name}: wrong secrets spread over post, Basic and revocation count once for the pair`, () =>
      Effect.gen(function*() {
        yield* now
        const fixture = yield* createFixture()
        const attacker = attackerAddress()
        const attempts = times(PARALLEL, (i) =>
          i % 3 === 0
            ? tokenAttempt(fixture, wrong())
            : i % 3 === 1
            ? tokenAttempt(fixture, wrong(), true)
            : revokeAttempt(fixture, wrong()))
        const answers = yield* inParallel(attacker, attempts)
        expectExactlyLimitEvaluated(answers, CLIENT_WRONG, CLIENT_REFUSED)
        const [revocation] = yield* inParallel(attacker, [revokeAttempt(fixture, fixture.clientSecret)])
        expect(revocation!.status).toBe(429)
      }))

    it.effect(`${name}: a right secret among wrong ones never lets more than ${LIMIT} wrong ones be evaluated`, () =>
      Effect.gen(function*() {
        yield* now
        const fixture = yield* createFixture()
        const attacker = attackerAddress()
        const attempts = times(PARALLEL, (i) => tokenAttempt(fixture, i === PARALLEL / 2 ? fixture.clientSecret : wrong()))
        const answers = yield* inParallel(attacker, attempts)
        const right = answers[PARALLEL / 2]!
        expect([200, 429]).toContain(right.status)
        expectExactlyLimitEvaluated(answers.filter((answer) => answer !== right), CLIENT_WRONG, CLIENT_REFUSED)
      }))

    it.effect(`${name}: ${PARALLEL} wrong admin tokens at once → exactly ${LIMIT} answered 401, the rest 429`, () =>
      Effect.gen(function*() {
        yield* now
        const attacker = attackerAddress()
        const answers = yield* inParallel(attacker, times(PARALLEL, () => adminAttempt("/admin/session", wrong())))
        expectExactlyLimitEvaluated(answers, ADMIN_WRONG, ADMIN_REFUSED)
        for (const answer of answers.filter((a) => a.status === 401)) {
          expect(answer.headers["www-authenticate"]).toBe(`Bearer realm="admin"`)
        }
        // The address is refused, the right token included; another address is not.
        const [right] = yield* inParallel(attacker, [adminAttempt("/admin/session", ADMIN_TOKEN)])
        expect(right!.status).toBe(429)
        const [elsewhere] = yield* inParallel(attackerAddress(), [adminAttempt("/admin/session", ADMIN_TOKEN)])
        expect(elsewhere!.status).toBe(200)
      }))

    it.effect(`${name}: wrong admin tokens spread over the admin API and introspection count once for the address`, () =>
      Effect.gen(function*() {
        yield* now
        const attacker = attackerAddress()
        const attempts = times(PARALLEL, (i) =>
          i % 3 === 0
            ? adminAttempt("/admin/session", wrong())
            : i % 3 === 1
            ? adminAttempt("/admin/profiles", wrong())
            : introspectAttempt(wrong()))
        const answers = yield* inParallel(attacker, attempts)
        expectExactlyLimitEvaluated(answers, ADMIN_WRONG, ADMIN_REFUSED)
        const [introspection] = yield* inParallel(attacker, [introspectAttempt(ADMIN_TOKEN)])
        expect(introspection!.status).toBe(429)
      }))
  })

describe("hostile throttles: memory", () => {
  hostileThrottleCases("memory", () => memoryStorage)
})

describe("hostile throttles: embedded database", () => {
  hostileThrottleCases("embedded", embeddedStorage)
})

describeWithPostgres("hostile throttles: PostgreSQL", () => {
  hostileThrottleCases("PostgreSQL", postgresStorage)
})
