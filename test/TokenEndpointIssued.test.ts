/**
 * `POST /oauth/token` over HTTP, as docs/contract.md §1 states it: the access token itself and the
 * bookkeeping a successful request leaves behind (last_used_at).
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import type { JsonWebKey } from "node:crypto"
import { basicAuthorization, decodeJwt, verifyRs256 } from "./support/Http.js"
import { admin, createFixture, type Fixture, makeTestServer, send, tokenRequest } from "../src/testing.js"
import { INVALID_CLIENT, MISSING, expectError, expectToken, targetFields, without, wrongSecret } from "./support/TokenEndpoint.js"

const credentialsOf = (fixture: Fixture) =>
  Effect.map(admin.get(`${fixture.servicePath}/credentials`), (response) => {
    expect(response.status).toBe(200)
    return response.body.credentials as ReadonlyArray<{ client_id: string; created_at: string; last_used_at: string | null }>
  })

const jwks = Effect.map(send(HttpClientRequest.get("/.well-known/jwks.json")), (response) => {
  expect(response.status).toBe(200)
  return response.body.keys as ReadonlyArray<JsonWebKey & { kid: string }>
})

describe("POST /oauth/token: the access token", () => {
  layer(makeTestServer())((it) => {
    it.effect("the 200 body has exactly access_token, token_type, expires_in and scope; no refresh_token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(fixture.tokenFields)
        expectToken(response)
        expect(Object.keys(response.body).sort()).toEqual(["access_token", "expires_in", "scope", "token_type"])
        expect(response.body).not.toHaveProperty("refresh_token")
      }))

    it.effect("is a JWS whose header is {alg: RS256, typ: JWT, kid} with kid published in the JWKS", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const { header } = decodeJwt(expectToken(yield* tokenRequest(fixture.tokenFields)))
        expect(header).toEqual({ alg: "RS256", typ: "JWT", kid: expect.any(String) })
        expect((yield* jwks).map((key) => key.kid)).toContain(header.kid)
      }))

    it.effect("carries data as requested, scope, iat, exp = iat + 3600, iss, aud = the service call's URL, sub = client_id and jti", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const before = yield* Clock.currentTimeMillis
        const token = expectToken(yield* tokenRequest(fixture.tokenFields))
        const after = yield* Clock.currentTimeMillis
        const { payload } = decodeJwt(token)
        expect(payload).toEqual({
          data: { service_uuid: fixture.uuid, profile: fixture.profile, environment: fixture.environment },
          scope: "service:call",
          iat: expect.any(Number),
          exp: payload.iat + 3600,
          iss: "http://issuer.test",
          aud: `http://issuer.test/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`,
          sub: fixture.clientId,
          client_id: fixture.clientId,
          jti: expect.any(String)
        })
        expect(Number.isInteger(payload.iat)).toBe(true)
        expect(payload.iat).toBeGreaterThanOrEqual(Math.floor(before / 1000))
        expect(payload.iat).toBeLessThanOrEqual(Math.ceil(after / 1000))
        expect(payload.jti.length).toBeGreaterThan(0)
      }))

    it.effect("jti is unique per token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const first = decodeJwt(expectToken(yield* tokenRequest(fixture.tokenFields))).payload
        const second = decodeJwt(expectToken(yield* tokenRequest(fixture.tokenFields))).payload
        expect(first.jti).not.toBe(second.jti)
      }))

    it.effect("the signature verifies with node:crypto against the JWKS key named by kid", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = expectToken(yield* tokenRequest(fixture.tokenFields))
        const key = (yield* jwks).find((candidate) => candidate.kid === decodeJwt(token).header.kid)
        expect(key).toBeDefined()
        expect(verifyRs256(token, key!)).toBe(true)

        // And a token with a changed payload does not.
        const [header, , signature] = token.split(".")
        const forgedPayload = Buffer.from(
          JSON.stringify({ ...decodeJwt(token).payload, scope: "admin" })
        ).toString("base64url")
        expect(verifyRs256(`${header}.${forgedPayload}.${signature}`, key!)).toBe(false)
      }))

    it.effect("a token issued through Basic names the same credential in sub and client_id", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = expectToken(
          yield* tokenRequest(targetFields(fixture), {
            authorization: basicAuthorization(fixture.clientId, fixture.clientSecret)
          })
        )
        expect(decodeJwt(token).payload).toMatchObject({
          data: { service_uuid: fixture.uuid, profile: fixture.profile, environment: fixture.environment },
          sub: fixture.clientId,
          client_id: fixture.clientId
        })
      }))
  })
})

describe("POST /oauth/token: last_used_at", () => {
  layer(makeTestServer())((it) => {
    it.effect("is null before any token request and set after a successful one", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const before = yield* credentialsOf(fixture)
        expect(before).toEqual([{ client_id: fixture.clientId, created_at: expect.any(String), expires_at: null, last_used_at: null }])

        expectToken(yield* tokenRequest(fixture.tokenFields))
        const now = yield* Clock.currentTimeMillis
        const [after] = yield* credentialsOf(fixture)
        expect(after!.client_id).toBe(fixture.clientId)
        expect(after!.last_used_at).toEqual(expect.any(String))
        const lastUsed = Date.parse(after!.last_used_at!)
        expect(Number.isNaN(lastUsed)).toBe(false)
        expect(lastUsed).toBeGreaterThanOrEqual(Date.parse(after!.created_at) - 60_000)
        expect(lastUsed).toBeLessThanOrEqual(now)
      }))

    it.effect("a failed token request does not set it", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret }), 401, INVALID_CLIENT)
        expectError(
          yield* tokenRequest(targetFields(fixture), { authorization: basicAuthorization(fixture.clientId, wrongSecret) }),
          401,
          INVALID_CLIENT
        )
        expectError(yield* tokenRequest(without(fixture.tokenFields, "grant_type")), 400, MISSING)
        expect(yield* credentialsOf(fixture)).toEqual([
          { client_id: fixture.clientId, created_at: expect.any(String), expires_at: null, last_used_at: null }
        ])
      }))

    it.effect("only the credential that was used is touched", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const second = yield* admin.post(`${fixture.servicePath}/credentials`)
        expect(second.status).toBe(201)
        expectToken(yield* tokenRequest(fixture.tokenFields))
        const credentials = yield* credentialsOf(fixture)
        expect(credentials.find((c) => c.client_id === fixture.clientId)?.last_used_at).toEqual(expect.any(String))
        expect(credentials.find((c) => c.client_id === second.body.client_id)?.last_used_at).toBeNull()
      }))
  })
})
