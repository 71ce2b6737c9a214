/**
 * Credentials that expire, driven by the server's clock (TestClock) through the real
 * HttpApi, on each storage: `expires_at` on creation and in a `save`, the profile's
 * `credential_max_lifetime_days`, the refusal at expiry (the token endpoint's `invalid_client`,
 * the gateway's `invalid_token`) on both entries, the audit event written once, the gauges.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer, TestClock } from "effect"
import {
  admin,
  createFixture,
  type Fixture,
  fixtureOf,
  issueToken,
  makeTestServer,
  send,
  type TestStorage,
  tokenRequest
} from "../src/testing.js"
import { HttpClientRequest } from "@effect/platform"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { callThroughApp } from "./support/AppEntry.js"
import { callPath, callService, expectEcho, expectInvalidToken, serverNow } from "./support/Tokens.js"

const DAY = 86_400_000

const iso = (millis: number) => new Date(millis).toISOString()

/** A second credential on the fixture's service, expiring at `expiresAt` (ms) when given. */
const addCredential = (fixture: Fixture, expiresAt?: number) =>
  Effect.map(
    admin.post(`${fixture.servicePath}/credentials`, expiresAt === undefined ? {} : { expires_at: iso(expiresAt) }),
    (response) => {
      expect(response.status).toBe(201)
      return { response, fixture: fixtureOf(fixture, response.body) }
    }
  )

/** The server's clock in ms (a token's `iat`, so to the second). */
const nowOf = (fixture: Fixture) => Effect.map(serverNow(fixture), (seconds) => seconds * 1000)

/** The audit trail's `credential.expired` events of a profile, waited for (the sweep runs every real second). */
const expiredEvents = (profile: string, expected: number) =>
  Effect.gen(function*() {
    for (let attempt = 0;; attempt++) {
      const page = yield* admin.get(`/admin/audit?profile=${profile}`)
      const events = page.body.events.filter((event: { action: string }) => event.action === "credential.expired")
      if (events.length >= expected || attempt >= 30) return events
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
    }
  })

const gauge = (text: string, within: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`service_auth_credentials_expiring{within="${within}"}`))
  return line === undefined ? undefined : Number(line.split(" ").pop())
}

const expiry = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage }), { timeout: 120_000 })((it) => {
    it.effect("at expires_at the credential is refused as deleted: its token requests and its tokens, on both entries", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* nowOf(fixture)
        const { fixture: expiring, response } = yield* addCredential(fixture, now + 60_000)
        expect(Object.keys(response.body).sort()).toEqual([
          "client_id",
          "client_secret",
          "created_at",
          "expires_at",
          "token_endpoint_auth_method"
        ])
        expect(response.body.expires_at).toBe(iso(now + 60_000))
        const listed = yield* admin.get(`${fixture.servicePath}/credentials`)
        expect(listed.body.credentials.map((c: { expires_at: string | null }) => c.expires_at)).toEqual([null, iso(now + 60_000)])

        const token = yield* issueToken(expiring)
        expectEcho(yield* callService(callPath(expiring), { token }), expiring, expiring.clientId)

        yield* TestClock.adjust("59 seconds")
        expectEcho(yield* callService(callPath(expiring), { token }), expiring, expiring.clientId)

        yield* TestClock.adjust("1 second")
        const refused = yield* tokenRequest(expiring.tokenFields)
        expect({ status: refused.status, body: refused.body }).toEqual({
          status: 401,
          body: { error: "invalid_client", error_description: "Invalid client credentials" }
        })
        expect(refused.headers["cache-control"]).toBe("no-store")
        // Refused saying what happened: the credential expired, nothing was revoked.
        const expiredCall = yield* callService(callPath(expiring), { token })
        expectInvalidToken(expiredCall)
        expect(expiredCall.body).toEqual({ error: "invalid_token", error_description: "The access token's credential has expired" })
        // The app's entry (a chunked body) refuses it too, with the same words.
        const expiredApp = yield* callThroughApp(callPath(expiring), token)
        expectInvalidToken(expiredApp)
        expect(expiredApp.body).toEqual(expiredCall.body)
        // The credential without expiry is untouched.
        expectEcho(yield* callService(callPath(fixture), { token: yield* issueToken(fixture) }), fixture, fixture.clientId)

        // Audited once, by the server.
        const events = yield* expiredEvents(fixture.profile, 1)
        expect(events).toEqual([expect.objectContaining({
          action: "credential.expired",
          actor: "credential-expiry",
          source: "server",
          profile: fixture.profile,
          environment: fixture.environment,
          service_uuid: fixture.uuid,
          client_id: expiring.clientId,
          details: { expires_at: iso(now + 60_000) }
        })])
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1_500)))
        expect(yield* expiredEvents(fixture.profile, 1)).toHaveLength(1)

        // Still counts toward the limit of two until deleted.
        expect((yield* admin.post(`${fixture.servicePath}/credentials`)).status).toBe(409)
        expect((yield* admin.delete(`${fixture.servicePath}/credentials/${expiring.clientId}`)).status).toBe(204)
        expect((yield* admin.post(`${fixture.servicePath}/credentials`)).status).toBe(201)
      }))

    it.effect("expires_at must be in the future; a save's add_credential takes it too", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* nowOf(fixture)
        const past = yield* admin.post(`${fixture.servicePath}/credentials`, { expires_at: iso(now - 1000) })
        expect({ status: past.status, body: past.body }).toEqual({
          status: 400,
          body: { error: "invalid_request", error_description: "expires_at must be in the future" }
        })
        const saved = yield* admin.post(`/admin/profiles/${fixture.profile}/save`, {
          changes: [{ op: "add_credential", environment: fixture.environment, service_uuid: fixture.uuid, expires_at: iso(now + DAY) }]
        })
        expect(saved.status).toBe(200)
        expect(saved.body.created[0].expires_at).toBe(iso(now + DAY))
        const profile = yield* admin.get(`/admin/profiles/${fixture.profile}`)
        expect(profile.body.environments[0].services[0].credentials[1].expires_at).toBe(iso(now + DAY))
      }))

    it.effect("a profile's credential_max_lifetime_days caps new credentials and is the default lifetime", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* nowOf(fixture)
        const set = yield* admin.put(`/admin/profiles/${fixture.profile}`, { credential_max_lifetime_days: 30 })
        expect(set.status).toBe(200)
        expect(set.body.credential_max_lifetime_days).toBe(30)
        const tooLong = yield* admin.post(`${fixture.servicePath}/credentials`, { expires_at: iso(now + 31 * DAY) })
        expect({ status: tooLong.status, body: tooLong.body }).toEqual({
          status: 400,
          body: {
            error: "invalid_request",
            error_description: "expires_at must be at most 30 days ahead (the profile's credential_max_lifetime_days)"
          }
        })
        const { response } = yield* addCredential(fixture)
        expect(Date.parse(response.body.expires_at)).toBe(Date.parse(response.body.created_at) + 30 * DAY)

        const invalid = yield* admin.put(`/admin/profiles/${fixture.profile}`, { credential_max_lifetime_days: 3651 })
        expect(invalid.status).toBe(400)
        const removed = yield* admin.put(`/admin/profiles/${fixture.profile}`, { credential_max_lifetime_days: null })
        expect(removed.status).toBe(200)
        expect(Object.keys(removed.body).sort()).toEqual(["created_at", "environments", "profile"])
        // Each change of the policy is audited; a PUT that changes nothing is not.
        expect((yield* admin.put(`/admin/profiles/${fixture.profile}`, { credential_max_lifetime_days: null })).status).toBe(200)
        const trail = yield* admin.get(`/admin/audit?profile=${fixture.profile}`)
        const changes = trail.body.events.filter((event: { action: string }) => event.action === "profile.changed")
        expect(changes.map((event: { details: unknown }) => event.details)).toEqual([null, { credential_max_lifetime_days: 30 }])
      }))

    it.effect("the gauges count credentials that expire within 7 and 30 days, not those expired", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* nowOf(fixture)
        const before = (yield* send(HttpClientRequest.get("/metrics"))).text
        const base7 = gauge(before, "7d") ?? 0
        const base30 = gauge(before, "30d") ?? 0
        yield* addCredential(fixture, now + 3 * DAY)
        const second = yield* createFixture()
        yield* addCredential(second, now + 20 * DAY)
        const after = (yield* send(HttpClientRequest.get("/metrics"))).text
        expect(gauge(after, "7d")).toBe(base7 + 1)
        expect(gauge(after, "30d")).toBe(base30 + 2)
        expect(after).not.toContain(fixture.clientId)
      }))
  })

describe("credential expiry (memory)", () => expiry(memoryStorage))
describe("credential expiry (embedded PGlite)", () => expiry(embeddedStorage()))
describeWithPostgres("credential expiry (PostgreSQL)", () => expiry(postgresStorage()))
