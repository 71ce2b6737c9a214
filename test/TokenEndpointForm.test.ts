/**
 * `POST /oauth/token` over HTTP, as docs/contract.md §1 states it: form parsing and both client
 * authentication methods (client_secret_post and client_secret_basic).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import {
  basicAuthorization,
  decodeJwt,
  formEncode,
  oauthError,
  percentEncodeAll,
  rawTokenRequest,
  unknownClientId
} from "./support/Http.js"
import { admin, createFixture, makeTestServer, tokenRequest, uniqueName } from "../src/testing.js"
import { INVALID_CLIENT, MISSING, expectError, expectToken, targetFields, wrongSecret } from "./support/TokenEndpoint.js"

describe("POST /oauth/token: the form body", () => {
  layer(makeTestServer())((it) => {
    it.effect("a field sent twice → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const body = `${new URLSearchParams(fixture.tokenFields)}&client_secret=${formEncode(fixture.clientSecret)}`
        expectError(yield* tokenRequest(body), 400, oauthError("invalid_request"))
      }))

    it.effect("grant_type sent twice → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const body = `${new URLSearchParams(fixture.tokenFields)}&grant_type=client_credentials`
        expectError(yield* tokenRequest(body), 400, oauthError("invalid_request"))
      }))

    it.effect("a JSON body with every field correct → 400 Missing required parameters", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* rawTokenRequest(JSON.stringify(fixture.tokenFields), { contentType: "application/json" })
        expectError(response, 400, MISSING)
      }))

    it.effect("a form body without any Content-Type → 400 Missing required parameters", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* rawTokenRequest(new URLSearchParams(fixture.tokenFields).toString())
        expectError(response, 400, MISSING)
      }))

    it.effect("a form body sent as text/plain → 400 Missing required parameters", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* rawTokenRequest(new URLSearchParams(fixture.tokenFields).toString(), {
          contentType: "text/plain"
        })
        expectError(response, 400, MISSING)
      }))

    it.effect("a form body sent as multipart/form-data → 400 Missing required parameters", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const boundary = "xyzzy"
        const body = Object.entries(fixture.tokenFields)
          .map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
          .join("") + `--${boundary}--\r\n`
        const response = yield* rawTokenRequest(body, { contentType: `multipart/form-data; boundary=${boundary}` })
        expectError(response, 400, MISSING)
      }))

    it.effect("the media type may carry a charset parameter and any letter case", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const body = new URLSearchParams(fixture.tokenFields).toString()
        expectToken(yield* rawTokenRequest(body, { contentType: "application/x-www-form-urlencoded; charset=UTF-8" }))
        expectToken(yield* rawTokenRequest(body, { contentType: "Application/X-WWW-Form-URLEncoded" }))
      }))

    it.effect("unrecognised parameters are ignored (RFC 6749 §3.2)", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectToken(yield* tokenRequest({ ...fixture.tokenFields, audience: "elsewhere", foo: "bar" }))
      }))

    it.effect("a body over 1 MiB (1.5 MB of form data) → 413 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const body = `${new URLSearchParams(fixture.tokenFields)}&padding=${"a".repeat(1_500_000)}`
        const response = yield* tokenRequest(body)
        expectError(response, 413, oauthError("invalid_request"))
      }))
  })
})

describe("POST /oauth/token: client_secret_basic (RFC 6749 §2.3.1)", () => {
  layer(makeTestServer())((it) => {
    it.effect("issues a token for credentials sent with HTTP Basic", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(targetFields(fixture), {
          authorization: basicAuthorization(fixture.clientId, fixture.clientSecret)
        })
        const token = expectToken(response)
        expect(decodeJwt(token).payload).toMatchObject({ sub: fixture.clientId, client_id: fixture.clientId })
      }))

    it.effect("the id and secret inside Basic are form-decoded: svc%5F… is svc_…", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const encodedId = fixture.clientId.replace("svc_", "svc%5F")
        const authorization = `Basic ${Buffer.from(`${encodedId}:${fixture.clientSecret}`).toString("base64")}`
        expectToken(yield* tokenRequest(targetFields(fixture), { authorization }))
      }))

    it.effect("the id and secret inside Basic may be percent-encoded byte by byte", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const authorization = `Basic ${
          Buffer.from(`${percentEncodeAll(fixture.clientId)}:${percentEncodeAll(fixture.clientSecret)}`).toString("base64")
        }`
        expectToken(yield* tokenRequest(targetFields(fixture), { authorization }))
      }))

    it.effect("the scheme is case-insensitive: basic and BASIC", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectToken(
          yield* tokenRequest(targetFields(fixture), {
            authorization: basicAuthorization(fixture.clientId, fixture.clientSecret, "basic")
          })
        )
        expectToken(
          yield* tokenRequest(targetFields(fixture), {
            authorization: basicAuthorization(fixture.clientId, fixture.clientSecret, "BASIC")
          })
        )
      }))

    it.effect("Basic with a wrong secret → 401 invalid_client with WWW-Authenticate: Basic realm=\"oauth\"", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(targetFields(fixture), {
          authorization: basicAuthorization(fixture.clientId, wrongSecret)
        })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("Basic with an unknown client id → 401 invalid_client with the Basic challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(targetFields(fixture), {
          authorization: basicAuthorization(unknownClientId(), fixture.clientSecret)
        })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("Basic with a deleted credential → 401 invalid_client with the Basic challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expect((yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`)).status).toBe(204)
        const response = yield* tokenRequest(targetFields(fixture), {
          authorization: basicAuthorization(fixture.clientId, fixture.clientSecret)
        })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("Basic and client_secret in the body at once → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(
          { ...targetFields(fixture), client_secret: fixture.clientSecret },
          { authorization: basicAuthorization(fixture.clientId, fixture.clientSecret) }
        )
        expectError(response, 400, oauthError("invalid_request"))
      }))

    it.effect("Basic and client_id plus client_secret in the body at once → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(fixture.tokenFields, {
          authorization: basicAuthorization(fixture.clientId, fixture.clientSecret)
        })
        expectError(response, 400, oauthError("invalid_request"))
      }))

    it.effect("malformed Basic (not base64) → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(targetFields(fixture), { authorization: "Basic !!!not-base64!!!" })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("malformed Basic (no colon) → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const authorization = `Basic ${Buffer.from(`${fixture.clientId}${fixture.clientSecret}`).toString("base64")}`
        const response = yield* tokenRequest(targetFields(fixture), { authorization })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("Basic with an empty id and secret counts as missing (row 3) → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(targetFields(fixture), { authorization: basicAuthorization("", "") })
        expectError(response, 400, MISSING)
      }))

    it.effect("row 4 before row 5 with Basic: unknown profile and a wrong secret → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest(
          { ...targetFields(fixture), profile: uniqueName("nowhere") },
          { authorization: basicAuthorization(fixture.clientId, wrongSecret) }
        )
        expectError(response, 400, MISSING)
        expect(response.headers["www-authenticate"]).toBeUndefined()
      }))
  })
})
