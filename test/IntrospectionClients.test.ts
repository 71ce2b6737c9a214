/**
 * Resource servers introspect with their own credential (`introspect_profiles`), through the real
 * HttpApi on every storage: the admin-only setting (shown on GET, recorded in the audit trail), then
 * `POST /oauth/introspect` with the token endpoint's client authentication (client_secret_basic,
 * client_secret_post, private_key_jwt) and each of its refusals: wrong secret, unknown, expired or
 * deleted credential (401 invalid_client, the token endpoint's throttle), a credential not allowed
 * (403 unauthorized_client), a token of another profile (`{"active":false}`), Bearer and client
 * authentication at once (400). Admin Bearer callers are covered by TokenIntrospection.test.ts.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer, TestClock } from "effect"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { adminAs, decodeJwt, expectErrorBody, NO_STORE_HEADERS, oauthError, request } from "./support/Http.js"
import { addKeyCredential, assertion, clientKey, JWT_BEARER } from "./support/ClientKeys.js"
import { serverNow, TEST_ISSUER } from "./support/Tokens.js"
import {
  admin,
  createFixture,
  type Fixture,
  fixtureOf,
  issueToken,
  makeTestServer,
  type TestStorage,
  tokenRequest,
  uniqueName
} from "../src/testing.js"

const FORM = "application/x-www-form-urlencoded"
const ISSUER = TEST_ISSUER
const FAILURE_LIMIT = 4

const basicOf = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`

const introspectWith = (fields: Record<string, string>, authorization?: string) =>
  request("POST", "/oauth/introspect", {
    body: new URLSearchParams(fields).toString(),
    contentType: FORM,
    headers: authorization === undefined ? {} : { authorization }
  })
/** client_secret_basic, the default of most libraries. */
const introspectAs = (rs: Fixture, token: string) => introspectWith({ token }, basicOf(rs.clientId, rs.clientSecret))

const allowPath = (rs: { readonly servicePath: string; readonly clientId: string }) =>
  `${rs.servicePath}/credentials/${rs.clientId}/introspect_profiles`
const allow = (rs: Fixture, profiles: ReadonlyArray<string> | null) =>
  Effect.map(admin.put(allowPath(rs), { introspect_profiles: profiles }), (response) => {
    expect(response.status).toBe(200)
    return response
  })

/** A resource server's credential (on a service of its own) allowed to introspect the tokens of `target`'s profile. */
const resourceServerFor = (target: Fixture) =>
  Effect.gen(function*() {
    const rs = yield* createFixture()
    yield* allow(rs, [target.profile])
    return rs
  })

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, config: { authFailureLimit: FAILURE_LIMIT } }), { timeout: 60_000 })((it) => {
    it.effect("an admin allows a credential: sorted, each once, shown on GET and recorded; [] or null takes it away", () =>
      Effect.gen(function*() {
        const rs = yield* createFixture()
        const [b, a] = [uniqueName("b"), uniqueName("a")]
        const set = yield* allow(rs, [b, a, b])
        expect(set.body).toMatchObject({ client_id: rs.clientId, introspect_profiles: [a, b].sort() })
        const listed = yield* admin.get(`${rs.servicePath}/credentials`)
        expect(listed.body.credentials[0].introspect_profiles).toEqual([a, b].sort())
        expect((yield* admin.get(rs.servicePath)).body.credentials[0].introspect_profiles).toEqual([a, b].sort())
        const events = (yield* admin.get(`/admin/audit?profile=${rs.profile}`)).body.events
          .filter((event: { action: string }) => event.action === "credential.changed")
        expect(events).toEqual([expect.objectContaining({ client_id: rs.clientId, details: { introspect_profiles: [a, b].sort() } })])
        // The same list again changes nothing and records nothing.
        yield* allow(rs, [a, b])
        const again = (yield* admin.get(`/admin/audit?profile=${rs.profile}`)).body.events
          .filter((event: { action: string }) => event.action === "credential.changed")
        expect(again.length).toBe(1)
        for (const none of [[], null]) {
          const cleared = yield* allow(rs, none)
          expect(cleared.body).not.toHaveProperty("introspect_profiles")
        }
        // A credential never allowed shows no member at all: documents read as before.
        expect(Object.keys((yield* admin.get(`${rs.servicePath}/credentials`)).body.credentials[0]).sort())
          .toEqual(["client_id", "created_at", "expires_at", "last_used_at"])
      }))

    it.effect("only an admin token may allow: an owner gets 403 naming the action; out of scope or no credential: 404", () =>
      Effect.gen(function*() {
        const rs = yield* createFixture()
        const owner = yield* admin.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: [rs.profile] })
        const asOwner = adminAs(owner.body.token)
        expectErrorBody(yield* asOwner.put(allowPath(rs), { introspect_profiles: [rs.profile] }), 403, {
          error: "forbidden",
          error_description: "Only an admin token may allow a credential to introspect tokens (introspect_profiles)"
        })
        const viewer = yield* admin.post("/admin/tokens", { name: uniqueName("viewer"), role: "viewer", profiles: [rs.profile] })
        expect((yield* adminAs(viewer.body.token).put(allowPath(rs), { introspect_profiles: [] })).status).toBe(403)
        const other = yield* admin.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: ["elsewhere"] })
        expect((yield* adminAs(other.body.token).put(allowPath(rs), { introspect_profiles: [] })).status).toBe(404)
        const missing = { servicePath: rs.servicePath, clientId: "svc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }
        expectErrorBody(yield* admin.put(allowPath(missing), { introspect_profiles: [] }), 404, oauthError("not_found"))
        expect((yield* admin.put(allowPath({ ...rs, clientId: "not-a-client" }), { introspect_profiles: [] })).status).toBe(404)
        for (const body of [{}, { introspect_profiles: "acme" }, { introspect_profiles: ["Not A Profile!"] }]) {
          expectErrorBody(yield* admin.put(allowPath(rs), body), 400, oauthError("invalid_request"))
        }
        expect((yield* admin.get(`${rs.servicePath}/credentials`)).body.credentials[0]).not.toHaveProperty("introspect_profiles")
      }))

    it.effect("an allowed credential introspects its profiles' tokens with Basic, post or private_key_jwt; others are inactive", () =>
      Effect.gen(function*() {
        const target = yield* createFixture()
        const elsewhere = yield* createFixture()
        const rs = yield* resourceServerFor(target)
        const token = yield* issueToken(target)
        const basic = yield* introspectAs(rs, token)
        expect(basic.status).toBe(200)
        expect(basic.headers).toMatchObject(NO_STORE_HEADERS)
        expect(basic.body).toMatchObject({
          active: true,
          client_id: target.clientId,
          token_type: "Bearer",
          jti: decodeJwt(token).payload.jti
        })
        const post = yield* introspectWith({ token, client_id: rs.clientId, client_secret: rs.clientSecret })
        expect(post.body).toEqual(basic.body)
        // Another profile's token, or its own: not in its list, so inactive, as RFC 7662 §2.2 says.
        expect((yield* introspectAs(rs, yield* issueToken(elsewhere))).body).toEqual({ active: false })
        expect((yield* introspectAs(rs, yield* issueToken(rs))).body).toEqual({ active: false })

        // A key credential, with private_key_jwt (aud: the issuer), exactly as at the token endpoint.
        const key = yield* Effect.promise(() => clientKey("EC"))
        const added = yield* addKeyCredential(rs, key.publicJwk)
        const keyed = { servicePath: rs.servicePath, clientId: added.body.client_id as string }
        expect((yield* admin.put(allowPath(keyed), { introspect_profiles: [target.profile] })).status).toBe(200)
        const nowMillis = (yield* serverNow(target)) * 1000
        const signed = yield* Effect.promise(() => assertion(key, keyed.clientId, ISSUER, {}, nowMillis))
        const jwt = yield* introspectWith({ token, client_assertion_type: JWT_BEARER, client_assertion: signed })
        expect(jwt.body).toEqual(basic.body)
        // The same assertion again is a replay: refused, as at the token endpoint.
        expectErrorBody(
          yield* introspectWith({ token, client_assertion_type: JWT_BEARER, client_assertion: signed }),
          401,
          oauthError("invalid_client")
        )
      }))

    it.effect("wrong secret or unknown client: 401 invalid_client, the Basic challenge for Basic; the token endpoint's throttle", () =>
      Effect.gen(function*() {
        const target = yield* createFixture()
        const rs = yield* resourceServerFor(target)
        const token = yield* issueToken(target)
        const wrong = yield* introspectWith({ token }, basicOf(rs.clientId, "wrong"))
        expectErrorBody(wrong, 401, oauthError("invalid_client"))
        expect(wrong.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
        const unknown = yield* introspectWith({ token, client_id: "svc_unknown", client_secret: "x" })
        expectErrorBody(unknown, 401, oauthError("invalid_client"))
        expect(unknown.headers).not.toHaveProperty("www-authenticate")
        // One count with the token endpoint: its failures and introspection's fill the same window.
        for (let i = 1; i < FAILURE_LIMIT; i++) {
          expect((yield* tokenRequest({ ...rs.tokenFields, client_secret: "wrong" })).status).toBe(401)
        }
        const blocked = yield* introspectAs(rs, token)
        expectErrorBody(blocked, 429, oauthError("invalid_client"))
        expect(blocked.headers["retry-after"]).toMatch(/^[0-9]+$/)
        expect((yield* tokenRequest(rs.tokenFields)).status).toBe(429)
      }))

    it.effect("a credential not allowed: 403 unauthorized_client; an expired or deleted one: 401 invalid_client", () =>
      Effect.gen(function*() {
        const target = yield* createFixture()
        const token = yield* issueToken(target)
        const notAllowed = yield* createFixture()
        const refused = yield* introspectAs(notAllowed, token)
        expectErrorBody(refused, 403, { error: "unauthorized_client", error_description: "This client may not introspect tokens" })
        expect(refused.headers).toMatchObject(NO_STORE_HEADERS)

        const rs = yield* resourceServerFor(target)
        const now = (yield* serverNow(target)) * 1000
        const expiring = yield* admin.post(`${rs.servicePath}/credentials`, { expires_at: new Date(now + 60_000).toISOString() })
        const expiringRs = fixtureOf(rs, expiring.body)
        yield* allow(expiringRs, [target.profile])
        expect((yield* introspectAs(expiringRs, token)).body).toMatchObject({ active: true })
        yield* TestClock.adjust("61 seconds")
        expectErrorBody(yield* introspectAs(expiringRs, token), 401, oauthError("invalid_client"))

        expect((yield* introspectAs(rs, token)).body).toMatchObject({ active: true })
        expect((yield* admin.delete(`${rs.servicePath}/credentials/${rs.clientId}`)).status).toBe(204)
        expectErrorBody(yield* introspectAs(rs, token), 401, oauthError("invalid_client"))
      }))

    it.effect("Bearer and client authentication at once: 400; client fields without a secret are no authentication", () =>
      Effect.gen(function*() {
        const target = yield* createFixture()
        const rs = yield* resourceServerFor(target)
        const token = yield* issueToken(target)
        const both = yield* introspectWith({ token, client_id: rs.clientId, client_secret: rs.clientSecret }, "Bearer test-admin-token")
        expectErrorBody(both, 400, { error: "invalid_request", error_description: "Use exactly one client authentication method" })
        // Basic and a secret in the form: two methods, as at the token endpoint.
        const twice = yield* introspectWith({ token, client_secret: rs.clientSecret }, basicOf(rs.clientId, rs.clientSecret))
        expectErrorBody(twice, 400, { error: "invalid_request", error_description: "Use exactly one client authentication method" })
        // A client_id alone authenticates nobody: the admin challenge, as for no caller at all.
        const alone = yield* introspectWith({ token, client_id: rs.clientId })
        expectErrorBody(alone, 401, oauthError("unauthorized"))
        expect(alone.headers["www-authenticate"]).toBe(`Bearer realm="admin"`)
        // token missing, authenticated or not: 400, before the client is looked up.
        expectErrorBody(yield* introspectWith({}, basicOf(rs.clientId, rs.clientSecret)), 400, {
          error: "invalid_request",
          error_description: "Missing required parameters"
        })
        // The admin token still works as Bearer alone, with a client_id it ignores.
        expect((yield* introspectWith({ token, client_id: rs.clientId }, "Bearer test-admin-token")).body).toMatchObject({ active: true })
      }))

    it.effect("a revoked token, or one of a deleted credential, is inactive for the allowed credential", () =>
      Effect.gen(function*() {
        const target = yield* createFixture()
        const rs = yield* resourceServerFor(target)
        const token = yield* issueToken(target)
        const revoked = yield* request("POST", "/oauth/revoke", {
          body: new URLSearchParams({ token }).toString(),
          contentType: FORM,
          headers: { authorization: basicOf(target.clientId, target.clientSecret) }
        })
        expect(revoked.status).toBe(200)
        expect((yield* introspectAs(rs, token)).body).toEqual({ active: false })
        const second = yield* issueToken(target)
        expect((yield* introspectAs(rs, second)).body).toMatchObject({ active: true })
        yield* admin.delete(`${target.servicePath}/credentials/${target.clientId}`)
        expect((yield* introspectAs(rs, second)).body).toEqual({ active: false })
      }))
  })

describe("introspection by clients: memory storage", () => suite(memoryStorage))
describe("introspection by clients: embedded database", () => suite(embeddedStorage()))
describeWithPostgres("introspection by clients: PostgreSQL", () => suite(postgresStorage()))
