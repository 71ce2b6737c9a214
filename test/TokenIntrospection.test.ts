/**
 * `POST /oauth/introspect` (RFC 7662) through the real server: an active token answers exactly its
 * claims; every inactive case (expired, revoked, of a deleted credential or service, forged, signed
 * by an unknown key, of another issuer, unparseable, for a service no longer oauth, outside the
 * caller's profiles) answers exactly `{"active":false}`; callers of each role and scope; no caller,
 * or a wrong one, is 401. Run on the in-memory store, the embedded database and PostgreSQL.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer, TestClock } from "effect"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { adminAs, decodeJwt, expectErrorBody, NO_STORE_HEADERS, oauthError, request } from "./support/Http.js"
import { attackerKeyPair, realClaims, realHeader, signWith, TEST_ISSUER } from "./support/Tokens.js"
import { testSigningKey } from "../src/keys/KeyService.js"
import {
  admin,
  ADMIN_TOKEN,
  createFixture,
  type Fixture,
  issueToken,
  makeTestServer,
  type TestStorage,
  uniqueName
} from "../src/testing.js"

const FORM = "application/x-www-form-urlencoded"
const INACTIVE = { active: false }

const introspectAs = (caller: string | undefined, token: string | undefined) =>
  request("POST", "/oauth/introspect", {
    body: new URLSearchParams(token === undefined ? {} : { token }).toString(),
    contentType: FORM,
    headers: caller === undefined ? {} : { authorization: caller }
  })
const introspect = (token: string, caller = `Bearer ${ADMIN_TOKEN}`) =>
  Effect.map(introspectAs(caller, token), (response) => {
    expect(response.status).toBe(200)
    expect(response.headers).toMatchObject(NO_STORE_HEADERS)
    return response.body as unknown
  })

const givenToken = (role: "admin" | "owner" | "viewer" | "introspector", profiles?: ReadonlyArray<string>) =>
  Effect.map(
    admin.post("/admin/tokens", { name: uniqueName(role), role, ...(profiles === undefined ? {} : { profiles }) }),
    (response) => {
      expect(response.status).toBe(201)
      return `Bearer ${response.body.token as string}`
    }
  )

const revoke = (fixture: Fixture, token: string) =>
  request("POST", "/oauth/revoke", {
    body: new URLSearchParams({ token, client_id: fixture.clientId, client_secret: fixture.clientSecret }).toString(),
    contentType: FORM
  })

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage }))((it) => {
    it.effect("an active token answers exactly its claims, no-store", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const claims = decodeJwt(token).payload
        const response = yield* introspectAs(`Bearer ${ADMIN_TOKEN}`, token)
        expect(response.status).toBe(200)
        expect(response.headers).toMatchObject(NO_STORE_HEADERS)
        expect(response.text).toBe(JSON.stringify({
          active: true,
          scope: "service:call",
          client_id: fixture.clientId,
          token_type: "Bearer",
          exp: claims.exp,
          iat: claims.iat,
          sub: fixture.clientId,
          aud: claims.aud,
          iss: claims.iss,
          jti: claims.jti,
          data: claims.data
        }))
      }))

    it.effect("callers: each role within its profiles sees it active; outside them, inactive", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const elsewhere = yield* createFixture()
        const token = yield* issueToken(fixture)
        for (const role of ["owner", "viewer", "introspector"] as const) {
          const inScope = yield* givenToken(role, [fixture.profile])
          expect([role, ((yield* introspect(token, inScope)) as { active: boolean }).active]).toEqual([role, true])
          const outOfScope = yield* givenToken(role, [elsewhere.profile])
          expect([role, yield* introspect(token, outOfScope)]).toEqual([role, INACTIVE])
        }
        const storedAdmin = yield* givenToken("admin")
        expect(((yield* introspect(token, storedAdmin)) as { active: boolean }).active).toBe(true)
      }))

    it.effect("an introspector token is good for nothing else", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const caller = yield* givenToken("introspector", [fixture.profile])
        const as = adminAs(caller.slice("Bearer ".length))
        expectErrorBody(yield* as.get(`/admin/profiles/${fixture.profile}`), 403, {
          error: "forbidden",
          error_description: "An introspector token may only introspect tokens"
        })
        expect((yield* as.get(`/admin/audit`)).status).toBe(403)
        expect((yield* as.get(`/admin/profiles`)).status).toBe(403)
        expect((yield* as.get(`/admin/tokens`)).status).toBe(403)
        expect((yield* as.post(`${fixture.servicePath}/credentials`)).status).toBe(403)
        expect((yield* as.get(`/admin/session`)).body).toMatchObject({ role: "introspector", profiles: [fixture.profile] })
      }))

    it.effect("no caller, another scheme, or a token that is none: 401 with the Bearer challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        for (const caller of [undefined, "Digest x", "Bearer wrong-token", `Bearer ${token}`]) {
          const response = yield* introspectAs(caller, token)
          expectErrorBody(response, 401, oauthError("unauthorized"))
          expect(response.headers["www-authenticate"]).toBe(`Bearer realm="admin"`)
          expect(response.headers).toMatchObject(NO_STORE_HEADERS)
        }
        // Basic is a client's authentication (client_secret_basic): refused as at the token endpoint.
        const basic = yield* introspectAs(`Basic ${Buffer.from("a:b").toString("base64")}`, token)
        expectErrorBody(basic, 401, oauthError("invalid_client"))
        expect(basic.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("a revoked introspector token is refused at the next request (its caller is remembered until then)", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const name = uniqueName("rs")
        const created = yield* admin.post("/admin/tokens", { name, role: "introspector", profiles: [fixture.profile] })
        const caller = `Bearer ${created.body.token as string}`
        for (let i = 0; i < 3; i++) expect(((yield* introspect(token, caller)) as { active: boolean }).active).toBe(true)
        expect((yield* admin.delete(`/admin/tokens/${name}`)).status).toBe(204)
        expect((yield* introspectAs(caller, token)).status).toBe(401)
        // The catalogue cache started again: a token still answers as it did.
        expect(((yield* introspect(token)) as { active: boolean }).active).toBe(true)
      }))

    it.effect("a missing token is 400 invalid_request", () =>
      Effect.gen(function*() {
        const response = yield* introspectAs(`Bearer ${ADMIN_TOKEN}`, undefined)
        expectErrorBody(response, 400, oauthError("invalid_request", "Missing required parameters"))
      }))

    it.effect("inactive: revoked, deleted credential, deleted service, service no longer oauth", () =>
      Effect.gen(function*() {
        const revoked = yield* createFixture()
        const revokedToken = yield* issueToken(revoked)
        expect((yield* revoke(revoked, revokedToken)).status).toBe(200)
        expect(yield* introspect(revokedToken)).toEqual(INACTIVE)

        const deleted = yield* createFixture()
        const deletedToken = yield* issueToken(deleted)
        expect((yield* admin.delete(`${deleted.servicePath}/credentials/${deleted.clientId}`)).status).toBe(204)
        expect(yield* introspect(deletedToken)).toEqual(INACTIVE)

        const gone = yield* createFixture()
        const goneToken = yield* issueToken(gone)
        expect((yield* admin.delete(gone.servicePath)).status).toBe(204)
        expect(yield* introspect(goneToken)).toEqual(INACTIVE)

        const open = yield* createFixture()
        const openToken = yield* issueToken(open)
        expect((yield* admin.put(open.servicePath, { name: "billing", auth_type: "none" })).status).toBe(200)
        expect(yield* introspect(openToken)).toEqual(INACTIVE)
      }))

    it.effect("inactive: forged, unknown key, another issuer, unparseable, oversized", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const now = decodeJwt(token).payload.iat as number
        const { kid, privateKey } = yield* testSigningKey
        const [header, payload, signature] = token.split(".") as [string, string, string]
        const tampered = `${header}.${
          Buffer.from(JSON.stringify({ ...decodeJwt(token).payload, client_id: "svc_x" })).toString("base64url")
        }.${signature}`
        const attacker = attackerKeyPair().privateKey
        const candidates = [
          `${header}.${payload}.${signature.slice(0, -4)}AAAA`,
          tampered,
          signWith(attacker, realHeader(kid), realClaims(fixture, now)),
          signWith(attacker, realHeader("unknown-kid"), realClaims(fixture, now)),
          signWith(privateKey, realHeader(kid), { ...realClaims(fixture, now), iss: "https://elsewhere.example" }),
          signWith(privateKey, realHeader(kid), {
            ...realClaims(fixture, now),
            aud: `https://elsewhere.example/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`
          }),
          "not-a-jwt",
          "a.b.c",
          "x".repeat(9000)
        ]
        for (const [index, candidate] of candidates.entries()) {
          expect([index, yield* introspect(candidate)]).toEqual([index, INACTIVE])
        }
        // A token signed by the server's own key with the right claims is active: the cases above
        // were refused for what they changed.
        expect(((yield* introspect(signWith(privateKey, realHeader(kid), realClaims(fixture, now)))) as { active: boolean }).active)
          .toBe(true)
        expect(TEST_ISSUER).toBe("http://issuer.test")
      }))

    // Last: it moves the layer's clock past every token issued so far.
    it.effect("inactive: expired", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        expect(((yield* introspect(token)) as { active: boolean }).active).toBe(true)
        yield* TestClock.adjust("3600 seconds")
        expect(yield* introspect(token)).toEqual(INACTIVE)
      }))
  })

describe("token introspection: memory storage", () => {
  suite(memoryStorage)
})

describe("token introspection: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("token introspection: PostgreSQL", () => {
  suite(postgresStorage())
})
