/**
 * `POST /oauth/token` over HTTP, as docs/contract.md §1 states it: the precedence table row by row (and
 * between rows), form parsing, both client authentication methods, the access token itself and the
 * bookkeeping a successful request leaves behind.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { JsonWebKey } from "node:crypto"
import {
  basicAuthorization,
  decodeJwt,
  expectErrorBody,
  formEncode,
  oauthError,
  percentEncodeAll,
  rawTokenRequest,
  unknownClientId,
  verifyRs256
} from "./support/Http.js"
import {
  admin,
  createFixture,
  type Fixture,
  type JsonResponse,
  makeTestServer,
  send,
  tokenRequest,
  uniqueName
} from "../src/testing.js"

const MISSING = oauthError("invalid_request", "Missing required parameters")
const UNSUPPORTED_GRANT = oauthError("unsupported_grant_type", "Only client_credentials grant type is supported")
const INVALID_CLIENT = oauthError("invalid_client", "Invalid client credentials")

const REQUIRED_FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const
type Field = typeof REQUIRED_FIELDS[number]

/** Every answer of the token endpoint: no caching (RFC 6749 §5.1), a JSON body. */
const expectNoStore = (response: JsonResponse) => {
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["pragma"]).toBe("no-cache")
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}

const expectError = (response: JsonResponse, status: number, body: ReturnType<typeof oauthError>) => {
  expectErrorBody(response, status, body)
  expectNoStore(response)
}

const expectToken = (response: JsonResponse) => {
  expect({ status: response.status, body: response.body }).toEqual({
    status: 200,
    body: { access_token: expect.any(String), token_type: "Bearer", expires_in: 3600, scope: "service:call" }
  })
  expectNoStore(response)
  return response.body.access_token as string
}

const without = (fields: Record<string, string>, ...names: ReadonlyArray<Field>) =>
  Object.fromEntries(Object.entries(fields).filter(([name]) => !names.includes(name as Field)))

/** The fixture's form without its client credentials, for client_secret_basic. */
const targetFields = (fixture: Fixture) => without(fixture.tokenFields, "client_id", "client_secret")

const wrongSecret = "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZy1zZWNyZXQ"

const credentialsOf = (fixture: Fixture) =>
  Effect.map(admin.get(`${fixture.servicePath}/credentials`), (response) => {
    expect(response.status).toBe(200)
    return response.body.credentials as ReadonlyArray<{ client_id: string; created_at: string; last_used_at: string | null }>
  })

const jwks = Effect.map(send(HttpClientRequest.get("/.well-known/jwks.json")), (response) => {
  expect(response.status).toBe(200)
  return response.body.keys as ReadonlyArray<JsonWebKey & { kid: string }>
})

// `layer(...)`, not `it.layer(...)`: in @effect/vitest 0.30 the first `it.layer` call overwrites
// the shared `it.layer` with its nested form, so a second describe block would nest its server in
// the first one's (one listening socket answered by several apps, sharing one store).
describe("POST /oauth/token: precedence of the checks (docs/contract.md §1)", () => {
  layer(makeTestServer())((it) => {
    it.effect("issues a token when every check passes", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectToken(yield* tokenRequest(fixture.tokenFields))
      }))

    // Row 1
    it.effect("row 1: grant_type missing → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest(without(fixture.tokenFields, "grant_type")), 400, MISSING)
      }))

    it.effect("row 1: grant_type sent empty counts as missing", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, grant_type: "" }), 400, MISSING)
      }))

    it.effect("row 1: an empty form → 400 invalid_request", () =>
      Effect.gen(function*() {
        expectError(yield* tokenRequest(""), 400, MISSING)
      }))

    it.effect("row 1 before row 2's and row 3's neighbours: grant_type and client_id missing → row 1", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest(without(fixture.tokenFields, "grant_type", "client_id")), 400, MISSING)
      }))

    it.effect("row 1 before row 5: grant_type missing with a wrong secret → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = { ...without(fixture.tokenFields, "grant_type"), client_secret: wrongSecret }
        expectError(yield* tokenRequest(fields), 400, MISSING)
      }))

    // Row 2
    it.effect("row 2: grant_type password → 400 unsupported_grant_type", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, grant_type: "password" }), 400, UNSUPPORTED_GRANT)
      }))

    it.effect("row 2: grant values are case-sensitive (Client_Credentials is unsupported)", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(
          yield* tokenRequest({ ...fixture.tokenFields, grant_type: "Client_Credentials" }),
          400,
          UNSUPPORTED_GRANT
        )
      }))

    it.effect("row 2 before row 3: unsupported grant with client_id missing → unsupported_grant_type", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = { ...without(fixture.tokenFields, "client_id"), grant_type: "authorization_code" }
        expectError(yield* tokenRequest(fields), 400, UNSUPPORTED_GRANT)
      }))

    it.effect("row 2 before row 3: unsupported grant and nothing else → unsupported_grant_type", () =>
      Effect.gen(function*() {
        expectError(yield* tokenRequest({ grant_type: "refresh_token" }), 400, UNSUPPORTED_GRANT)
      }))

    it.effect("row 2 before rows 4 and 5: unsupported grant, unknown profile, wrong secret → unsupported_grant_type", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = {
          ...fixture.tokenFields,
          grant_type: "password",
          profile: uniqueName("nowhere"),
          client_secret: wrongSecret
        }
        expectError(yield* tokenRequest(fields), 400, UNSUPPORTED_GRANT)
      }))

    // Row 3: a missing target names the fields it lacks (and `resource`, which replaces them).
    const missingOf = (field: Field) =>
      field === "client_id" || field === "client_secret"
        ? MISSING
        : oauthError("invalid_request", `Missing required parameters: ${field} (or resource, the service's URL)`)
    for (const field of REQUIRED_FIELDS.filter((name) => name !== "grant_type")) {
      it.effect(`row 3: ${field} missing → 400 invalid_request`, () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          expectError(yield* tokenRequest(without(fixture.tokenFields, field)), 400, missingOf(field))
        }))

      it.effect(`row 3: ${field} sent empty (\`${field}=\`) counts as missing`, () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          expectError(yield* tokenRequest({ ...fixture.tokenFields, [field]: "" }), 400, missingOf(field))
        }))
    }

    it.effect("row 3: no target at all names the three fields and resource", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const { grant_type, client_id, client_secret } = fixture.tokenFields
        expectError(
          yield* tokenRequest({ grant_type, client_id, client_secret }),
          400,
          oauthError("invalid_request", "Missing required parameters: profile, environment, service_uuid (or resource, the service's URL)")
        )
      }))

    it.effect("row 3 before row 5: a valid target with client_secret missing → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest(without(fixture.tokenFields, "client_secret")), 400, MISSING)
      }))

    it.effect("row 3 before row 5: a valid target with an unknown client id and no secret → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = { ...without(fixture.tokenFields, "client_secret"), client_id: unknownClientId() }
        expectError(yield* tokenRequest(fields), 400, MISSING)
      }))

    // Row 4
    it.effect("row 4: profile not found → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, profile: uniqueName("nowhere") }), 400, MISSING)
      }))

    it.effect("row 4: environment not in the profile → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, environment: "staging" }), 400, MISSING)
      }))

    it.effect("row 4: service not in the profile and environment → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, service_uuid: randomUUID() }), 400, MISSING)
      }))

    it.effect("row 4: the service exists, but in another environment of the profile → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expect((yield* admin.put(`/admin/profiles/${fixture.profile}/environments/staging`)).status).toBe(201)
        expectError(yield* tokenRequest({ ...fixture.tokenFields, environment: "staging" }), 400, MISSING)
      }))

    it.effect("row 4: service auth_type none (set by PUT) → 400 invalid_request even with its live credential", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture({ authType: "none" })
        expectError(yield* tokenRequest(fixture.tokenFields), 400, MISSING)
      }))

    it.effect("row 4: a malformed service_uuid → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, service_uuid: "not-a-uuid" }), 400, MISSING)
      }))

    it.effect("row 4 before row 5: unknown profile with a wrong secret → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = { ...fixture.tokenFields, profile: uniqueName("nowhere"), client_secret: wrongSecret }
        expectError(yield* tokenRequest(fields), 400, MISSING)
      }))

    it.effect("row 4 before row 5: unknown service with an unknown client id → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = {
          ...fixture.tokenFields,
          service_uuid: randomUUID(),
          client_id: unknownClientId()
        }
        expectError(yield* tokenRequest(fields), 400, MISSING)
      }))

    it.effect("row 4 before row 5: auth_type none with a wrong secret → 400, not 401", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture({ authType: "none" })
        expectError(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret }), 400, MISSING)
      }))

    // Row 5
    it.effect("row 5: unknown client id → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const fields = { ...fixture.tokenFields, client_id: unknownClientId() }
        expectError(yield* tokenRequest(fields), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: a client id that is not of the svc_ form → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, client_id: "someone" }), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: wrong secret → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectError(yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret }), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: deleted credential (DELETE through the admin API) → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        expectToken(yield* tokenRequest(fixture.tokenFields))
        expect((yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`)).status).toBe(204)
        expectError(yield* tokenRequest(fixture.tokenFields), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: the credential of another service in the same profile and environment → 401 invalid_client", () =>
      Effect.gen(function*() {
        const serviceA = yield* createFixture()
        const created = yield* admin.post(
          `/admin/profiles/${serviceA.profile}/environments/${serviceA.environment}/services`,
          { name: "ledger", auth_type: "oauth" }
        )
        expect(created.status).toBe(201)
        const credentialOfB = yield* admin.post(
          `/admin/profiles/${serviceA.profile}/environments/${serviceA.environment}/services/${created.body.uuid}/credentials`
        )
        expect(credentialOfB.status).toBe(201)
        const fields = {
          ...serviceA.tokenFields,
          client_id: credentialOfB.body.client_id,
          client_secret: credentialOfB.body.client_secret
        }
        expectError(yield* tokenRequest(fields), 401, INVALID_CLIENT)
        // The same credential is good for its own service.
        expectToken(yield* tokenRequest({ ...fields, service_uuid: created.body.uuid }))
      }))

    it.effect("row 5: the credential of a service in another profile → 401 invalid_client", () =>
      Effect.gen(function*() {
        const serviceA = yield* createFixture()
        const serviceB = yield* createFixture()
        const fields = { ...serviceA.tokenFields, client_id: serviceB.clientId, client_secret: serviceB.clientSecret }
        expectError(yield* tokenRequest(fields), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: one credential's id with another credential's secret → 401 invalid_client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const second = yield* admin.post(`${fixture.servicePath}/credentials`)
        expect(second.status).toBe(201)
        const fields = { ...fixture.tokenFields, client_secret: second.body.client_secret }
        expectError(yield* tokenRequest(fields), 401, INVALID_CLIENT)
      }))

    it.effect("row 5: a post-authenticated 401 carries no WWW-Authenticate challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const response = yield* tokenRequest({ ...fixture.tokenFields, client_secret: wrongSecret })
        expectError(response, 401, INVALID_CLIENT)
        expect(response.headers["www-authenticate"]).toBeUndefined()
      }))
  })
})

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
