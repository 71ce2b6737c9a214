/**
 * `POST /oauth/revoke` (RFC 7009) through the real server: a client revokes its own token with
 * either client authentication method, and the gateway refuses it from the next request on (the
 * cached route carries the revocation); another client's token is left alone and the answer says
 * nothing of it; a failed authentication is the token endpoint's 401 and counts toward its throttle.
 * Run on the in-memory store, the embedded database and PostgreSQL (the cross-instance case is
 * test/MultiInstanceRevocation.test.ts, on PostgreSQL).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { basicAuthorization, expectErrorBody, NO_STORE_HEADERS, oauthError, request } from "./support/Http.js"
import { admin, createFixture, type Fixture, issueToken, makeTestServer, type TestStorage } from "../src/testing.js"

const FORM = "application/x-www-form-urlencoded"

export const revoke = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  request("POST", "/oauth/revoke", { body: new URLSearchParams(fields).toString(), contentType: FORM, headers })

const byPost = (fixture: Fixture, token: string) => revoke({ token, client_id: fixture.clientId, client_secret: fixture.clientSecret })
const byBasic = (fixture: Fixture, token: string) =>
  revoke({ token, token_type_hint: "access_token" }, { authorization: basicAuthorization(fixture.clientId, fixture.clientSecret) })

export const callService = (fixture: Fixture, token: string) =>
  request("POST", `/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`, {
    body: "{}",
    contentType: "application/json",
    headers: { authorization: `Bearer ${token}` }
  })

const expectRevokedAnswer = (response: { status: number; text: string; headers: Readonly<Record<string, string>> }) => {
  expect({ status: response.status, text: response.text }).toEqual({ status: 200, text: "" })
  expect(response.headers).toMatchObject(NO_STORE_HEADERS)
}

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, config: { authFailureLimit: 3 } }))((it) => {
    for (const [method, send] of [["client_secret_post", byPost], ["client_secret_basic", byBasic]] as const) {
      it.effect(`revokes with ${method}: refused at the next call, the client's other token untouched`, () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          const token = yield* issueToken(fixture)
          const other = yield* issueToken(fixture)
          expect((yield* callService(fixture, token)).status).toBe(200)
          expectRevokedAnswer(yield* send(fixture, token))
          const refused = yield* callService(fixture, token)
          expectErrorBody(refused, 401, oauthError("invalid_token", "The access token has been revoked"))
          expect(refused.headers["www-authenticate"]).toBe(`Bearer realm="service", error="invalid_token"`)
          expect((yield* callService(fixture, other)).status).toBe(200)
          // Again: still 200, nothing more written.
          expectRevokedAnswer(yield* send(fixture, token))
        }))
    }

    it.effect("leaves another client's token alone, and answers 200 all the same", () =>
      Effect.gen(function*() {
        const mine = yield* createFixture()
        const theirs = yield* createFixture()
        const token = yield* issueToken(theirs)
        expectRevokedAnswer(yield* byPost(mine, token))
        expect((yield* callService(theirs, token)).status).toBe(200)
      }))

    it.effect("answers 200 for tokens that are not live ones: unknown, forged, unparseable", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const [header, payload] = token.split(".")
        for (const candidate of ["not-a-token", `${header}.${payload}.AAAA`, "a.b.c", "x".repeat(9000)]) {
          expectRevokedAnswer(yield* byPost(fixture, candidate))
        }
        expect((yield* callService(fixture, token)).status).toBe(200)
      }))

    it.effect("records token.revoked with the client id and the jti, never the token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const jti = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).jti as string
        expectRevokedAnswer(yield* byPost(fixture, token))
        const audit = yield* admin.get(`/admin/audit?profile=${fixture.profile}`)
        expect(audit.body.events[0]).toMatchObject({
          actor: fixture.clientId,
          action: "token.revoked",
          profile: fixture.profile,
          environment: fixture.environment,
          service_uuid: fixture.uuid,
          client_id: fixture.clientId,
          details: { jti }
        })
        expect(audit.text).not.toContain(token)
      }))

    it.effect("a missing token is 400 invalid_request; a JSON body carries no fields", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        for (
          const response of [
            yield* revoke({ client_id: fixture.clientId, client_secret: fixture.clientSecret }),
            yield* revoke({ token: "", client_id: fixture.clientId, client_secret: fixture.clientSecret }),
            yield* request("POST", "/oauth/revoke", {
              body: JSON.stringify({ token: "x", client_id: fixture.clientId, client_secret: fixture.clientSecret }),
              contentType: "application/json"
            })
          ]
        ) {
          expectErrorBody(response, 400, oauthError("invalid_request", "Missing required parameters"))
          expect(response.headers).toMatchObject(NO_STORE_HEADERS)
        }
        const twice = yield* request("POST", "/oauth/revoke", {
          body: `token=a&token=b&client_id=${fixture.clientId}&client_secret=${fixture.clientSecret}`,
          contentType: FORM
        })
        expectErrorBody(twice, 400, oauthError("invalid_request", "Parameter token is included more than once"))
      }))

    it.effect("a failed client authentication is the token endpoint's 401, counted toward its throttle", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const wrong = yield* revoke({ token, client_id: fixture.clientId, client_secret: "wrong" })
        expectErrorBody(wrong, 401, oauthError("invalid_client", "Invalid client credentials"))
        expect(wrong.headers).toMatchObject(NO_STORE_HEADERS)
        expect(wrong.headers["www-authenticate"]).toBeUndefined()
        const basic = yield* revoke({ token }, { authorization: basicAuthorization(fixture.clientId, "wrong") })
        expectErrorBody(basic, 401, oauthError("invalid_client", "Invalid client credentials"))
        expect(basic.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
        const unknown = yield* revoke({ token, client_id: "svc_unknown", client_secret: "x" })
        expectErrorBody(unknown, 401, oauthError("invalid_client", "Invalid client credentials"))
        expect((yield* revoke({ token, client_id: fixture.clientId, client_secret: "wrong again" })).status).toBe(401)
        // The third failure of the pair reached the limit: now 429, even with the right secret.
        const throttled = yield* byPost(fixture, token)
        expect(throttled.status).toBe(429)
        expect(throttled.body).toEqual(oauthError("invalid_client"))
        expect((yield* callService(fixture, token)).status).toBe(200)
      }))

    it.effect("a token of a deleted credential: 200, nothing to revoke", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const token = yield* issueToken(fixture)
        const second = yield* admin.post(`${fixture.servicePath}/credentials`)
        expect((yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`)).status).toBe(204)
        // The deleted credential cannot authenticate any more; the live one cannot revoke another's token.
        expect((yield* byPost(fixture, token)).status).toBe(401)
        const other = { ...fixture, clientId: second.body.client_id, clientSecret: second.body.client_secret }
        expectRevokedAnswer(yield* byPost(other, token))
      }))
  })

describe("token revocation: memory storage", () => {
  suite(memoryStorage)
})

describe("token revocation: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("token revocation: PostgreSQL", () => {
  suite(postgresStorage())
})
