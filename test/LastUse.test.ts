/**
 * `last_used_at` is the last time a credential was used at all (docs/contract.md §3): a token
 * request, or a service call let through with a token it issued, at most a minute behind, on both
 * entries of the call (the fast lane and the app). And `service-auth rotate`, which waits on it,
 * keeps the old credential while a client calls with a token it cached before the rotation began.
 * All on the server's clock (TestClock), through the real HttpApi.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { AdminClient } from "../src/cli/AdminClient.js"
import type { AdminClientShape, ServiceAddress } from "../src/cli/AdminClientShape.js"
import { rotate } from "../src/cli/Rotation.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { admin, createFixture, type Fixture, issueToken, makeTestServer, serverPort, type TestStorage } from "../src/testing.js"
import pg from "pg"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage, TEST_DATABASE_URL } from "./support/Databases.js"
import { asJsonResponse, rawRequest } from "./support/Http.js"
import { callPath, callService, expectEcho, expectServiceError, serverNow } from "./support/Tokens.js"

/** The fixture's credentials as the admin API lists them: client id → `last_used_at` in ms (or null). */
const lastUsed = (fixture: Fixture) =>
  Effect.map(admin.get(`${fixture.servicePath}/credentials`), (response) => {
    expect(response.status).toBe(200)
    return new Map<string, number | null>(
      response.body.credentials.map((c: { client_id: string; last_used_at: string | null }) => [
        c.client_id,
        c.last_used_at === null ? null : Date.parse(c.last_used_at)
      ])
    )
  })

const lastUsedOf = (fixture: Fixture) => Effect.map(lastUsed(fixture), (credentials) => credentials.get(fixture.clientId))

const MINUTE = 60_000

/** The same cases on each storage, each behind its cache: memory (recorded at once), and SQL (recorded, written in batches). */
const countsCalls = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage }), { timeout: 180_000 })((it) => {
    it.effect("a call with a cached token moves it, at most once a minute, never more than a minute behind", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const issuedAt = (yield* serverNow(fixture)) * 1000 // the second token request, same second
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt)

        yield* TestClock.adjust("30 minutes")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt + 30 * MINUTE)

        // Within the minute: not noted again (it may lag, by less than a minute).
        yield* TestClock.adjust("59 seconds")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt + 30 * MINUTE)

        yield* TestClock.adjust("1 second")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt + 31 * MINUTE)
      }))

    it.effect("on the app's entry too (a chunked body, which the fast lane hands over)", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const issuedAt = (yield* serverNow(fixture)) * 1000
        yield* TestClock.adjust("10 minutes")
        const port = yield* serverPort
        const answer = yield* Effect.promise(() =>
          rawRequest(port, {
            method: "POST",
            path: callPath(fixture),
            headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
            body: "{}",
            chunked: true
          })
        )
        expectEcho(asJsonResponse(answer), fixture, fixture.clientId)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt + 10 * MINUTE)
      }))

    it.effect("a refused call is no use: another service's token, an expired token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const other = yield* createFixture()
        const token = yield* issueToken(fixture)
        const issuedAt = (yield* serverNow(fixture)) * 1000

        yield* TestClock.adjust("5 minutes")
        expectServiceError(yield* callService(callPath(other), { token }), 401, "invalid_token", expect.any(String) as never)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt)

        yield* TestClock.adjust("3600 seconds")
        expectServiceError(yield* callService(callPath(fixture), { token }), 401, "invalid_token", expect.any(String) as never)
        expect(yield* lastUsedOf(fixture)).toBe(issuedAt)
      }))

    it.effect("a token request after a call never moves it backwards", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        yield* TestClock.adjust("2 minutes")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        const called = yield* lastUsedOf(fixture)
        // The catalogue still says the last token request was two minutes ago: this one is noted.
        yield* issueToken(fixture)
        expect(yield* lastUsedOf(fixture)).toBe(called)
      }))
  })

describe("last_used_at counts service calls made with a credential's token", () => {
  describe("in memory", () => countsCalls(memoryStorage))
  describe("embedded (PGlite)", () => countsCalls(embeddedStorage()))
  describeWithPostgres("PostgreSQL", () => countsCalls(postgresStorage()))
})

/**
 * The admin client `rotate` uses, over the test server's admin API (no request timeout: the test
 * moves the clock while a request may be in flight).
 */
const testAdminClient: AdminClientShape = {
  listCredentials: (address: ServiceAddress) =>
    Effect.map(
      admin.get(`/admin/profiles/${address.profile}/environments/${address.environment}/services/${address.uuid}/credentials`),
      (response) => ({
        credentials: response.body.credentials.map((c: { client_id: ClientId; created_at: string; last_used_at: string | null }) => ({
          client_id: c.client_id,
          created_at: new Date(c.created_at),
          last_used_at: c.last_used_at === null ? null : new Date(c.last_used_at)
        }))
      })
    ),
  addCredential: (address: ServiceAddress) =>
    Effect.map(
      admin.post(`/admin/profiles/${address.profile}/environments/${address.environment}/services/${address.uuid}/credentials`),
      (response) => ({ ...response.body, created_at: new Date(response.body.created_at) })
    ),
  removeCredential: (address: ServiceAddress, clientId: ClientId) =>
    Effect.asVoid(
      admin.delete(
        `/admin/profiles/${address.profile}/environments/${address.environment}/services/${address.uuid}/credentials/${clientId}`
      )
    )
} as unknown as AdminClientShape

/** Real time: the batches are written on the real clock, and PostgreSQL holds its locks in it. */
const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

// Uses are written in batches; an admin read writes what is noted first. A read that came while
// another batch was still being written (the periodic one's, or another read's) once went ahead:
// its own flush had nothing left to write, its SELECT began before that batch committed, and the
// credential was listed as never used (seen in CI, on PostgreSQL).
describeWithPostgres(
  "last_used_at on PostgreSQL, while a batch is being written",
  () =>
    layer(makeTestServer({ storage: postgresStorage() }), { timeout: 60_000 })((it) => {
      it.effect("an admin read waits for the batch already on its way, then lists the use", () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          // Another connection holds the credential's row, so the batch's UPDATE waits on it. Held
          // before the use is recorded: a periodic flush (each second) cannot write it first.
          const lock = new pg.Client({ connectionString: TEST_DATABASE_URL! })
          yield* Effect.promise(() => lock.connect())
          try {
            yield* Effect.promise(() => lock.query("BEGIN"))
            yield* Effect.promise(() => lock.query("SELECT 1 FROM credentials WHERE client_id = $1 FOR UPDATE", [fixture.clientId]))
            yield* issueToken(fixture)
            // The first read's flush (or the periodic one) takes the batch and is held writing it.
            const first = yield* Effect.fork(lastUsedOf(fixture))
            yield* realSleep(300)
            // The second read's own flush has nothing left to write: it must wait for that batch.
            const second = yield* Effect.fork(lastUsedOf(fixture))
            yield* realSleep(300)
            expect(Option.isNone(yield* Fiber.poll(first))).toBe(true)
            expect(Option.isNone(yield* Fiber.poll(second))).toBe(true)
            yield* Effect.promise(() => lock.query("COMMIT"))
            expect(yield* Fiber.join(second)).toEqual(expect.any(Number))
            expect(yield* Fiber.join(first)).toEqual(expect.any(Number))
          } finally {
            yield* Effect.promise(() => lock.end())
          }
        }))
    })
)

describe("rotate waits while a client calls with a token it cached", () => {
  layer(makeTestServer())((it) => {
    /** Starts `rotate` on the fixture's credential and waits until it watches (its first poll is scheduled). */
    const startRotate = (fixture: Fixture, idle: Option.Option<Duration.Duration>) =>
      Effect.gen(function*() {
        const sleeping = (yield* TestClock.sleeps()).length
        const fiber = yield* rotate({
          profile: fixture.profile as ProfileId,
          environment: fixture.environment as EnvironmentName,
          uuid: fixture.uuid as ServiceUuid,
          clientId: fixture.clientId as ClientId,
          idle,
          poll: Option.some(Duration.minutes(1)),
          force: false,
          json: true
        }).pipe(Effect.provide(Layer.succeed(AdminClient, testAdminClient)), Effect.fork)
        const settle = Effect.gen(function*() {
          // The wait's poll is real HTTP: let it answer and sleep again before the clock moves on.
          while ((yield* TestClock.sleeps()).length <= sleeping && (yield* Fiber.poll(fiber))._tag === "None") {
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 2)))
          }
        })
        yield* settle
        const minute = Effect.zipRight(TestClock.adjust("1 minute"), settle)
        return { fiber, minute }
      })

    const credentialIds = (fixture: Fixture) => Effect.map(lastUsed(fixture), (credentials) => [...credentials.keys()])

    it.effect("--idle 10m: a client calling every minute for its token's hour keeps the old credential; it goes once the client stops", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture) // cached before the new credential exists
        const { fiber, minute } = yield* startRotate(fixture, Option.some(Duration.minutes(10)))
        expect(yield* credentialIds(fixture)).toHaveLength(2)

        for (let elapsed = 1; elapsed <= 59; elapsed++) {
          yield* minute
          expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        }
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        expect(yield* credentialIds(fixture)).toContain(fixture.clientId)

        // The token has expired; the client has moved to the new credential. Ten quiet minutes
        // later (and at most a poll and a minute's lag more) rotate removes the old one.
        for (let elapsed = 0; elapsed < 9; elapsed++) yield* minute
        expect(yield* credentialIds(fixture)).toContain(fixture.clientId)
        for (let elapsed = 0; elapsed < 3; elapsed++) yield* minute
        yield* Fiber.join(fiber)
        expect(yield* credentialIds(fixture)).not.toContain(fixture.clientId)
        expect(yield* credentialIds(fixture)).toHaveLength(1)
      }))

    it.effect("the default --idle outlasts a cached token: a client calling once, just before its token expires, still gets through", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const { fiber, minute } = yield* startRotate(fixture, Option.none())
        for (let elapsed = 1; elapsed <= 59; elapsed++) yield* minute
        yield* TestClock.adjust("59 seconds")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        // Its call was a use: the wait starts again from it.
        for (let elapsed = 0; elapsed < 61; elapsed++) yield* minute
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        expect(yield* credentialIds(fixture)).toContain(fixture.clientId)
        for (let elapsed = 0; elapsed < 3; elapsed++) yield* minute
        yield* Fiber.join(fiber)
        expect(yield* credentialIds(fixture)).not.toContain(fixture.clientId)
      }))
  })
})
