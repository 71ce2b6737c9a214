/**
 * `POST /service/{profile}/{env}/json/{uuid}` over HTTP, as docs/contract.md §2 states it: every row of the
 * table (404, the RFC 6750 challenges, 403, the body checks, 413), the binding of a token to its
 * service, instant revocation, authentication before the body is read, and the echo handler.
 *
 * Servers are set up with `layer(...)` from @effect/vitest rather than `it.layer(...)`: the first
 * `it.layer(l)((it) => …)` in a file replaces the shared `it.layer` with its own nested variant, so
 * every later `it.layer(makeTestServer({ config }))` would be built on top of the first server's
 * layers and answer with the first server's configuration (e.g. its `maxBodyBytes`).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jose from "jose"
import { randomUUID } from "node:crypto"
import { testSigningKey } from "../src/auth/KeyService.js"
import {
  admin,
  createFixture,
  type Fixture,
  fixtureOf,
  issueToken,
  makeTestServer,
  serverPort,
  sharedFixture,
  tokenRequest,
  uniqueName
} from "../src/testing.js"
import {
  attackerKeyPair,
  callPath,
  callService,
  CHALLENGE,
  expectEcho,
  expectInvalidToken,
  expectServiceError,
  realClaims,
  realHeader,
  serverNow,
  signWith
} from "./support/Tokens.js"
import { asJsonResponse, rawRequest } from "./support/Http.js"

/** Creates (or replaces) an oauth service at a fixed address with one credential, and issues its token. */
const serviceAt = (profile: string, environment: string, uuid: string = randomUUID()) =>
  Effect.gen(function*() {
    expect((yield* admin.put(`/admin/profiles/${profile}`)).status).toBeOneOf([200, 201])
    expect((yield* admin.put(`/admin/profiles/${profile}/environments/${environment}`)).status).toBeOneOf([200, 201])
    const servicePath = `/admin/profiles/${profile}/environments/${environment}/services/${uuid}`
    const service = yield* admin.put(servicePath, { name: "billing", auth_type: "oauth" })
    expect(service.status).toBeOneOf([200, 201])
    expect(service.body.uuid).toBe(uuid)
    const credential = yield* admin.post(`${servicePath}/credentials`)
    expect(credential.status).toBe(201)
    return fixtureOf({ profile, environment, uuid }, credential.body)
  })

/** A fixture and a token the server issued for it. */
const withToken = (options: Parameters<typeof createFixture>[0] = {}) =>
  Effect.gen(function*() {
    const fixture = yield* createFixture(options)
    return { fixture, token: yield* issueToken(fixture) }
  })

/**
 * POSTs a body in chunks with `Transfer-Encoding: chunked` (no Content-Length), pausing `pauseMs`
 * between chunks so that the server reads a body that is still arriving.
 */
const chunkedCall = (
  path: string,
  headers: Record<string, string>,
  chunks: ReadonlyArray<string>,
  pauseMs = 0
) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      rawRequest(port, {
        method: "POST",
        path,
        headers: { "content-type": "application/json", ...headers },
        pieces: chunks,
        pauseMs,
        timeoutMs: 15_000
      })
    )).pipe(Effect.map(asJsonResponse))

/** A JSON object of exactly `bytes` bytes. */
const jsonObjectOfSize = (bytes: number) => {
  const skeleton = JSON.stringify({ pad: "" })
  return JSON.stringify({ pad: "x".repeat(bytes - skeleton.length) })
}

describe("POST /service/…: not found (404 not_found)", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())

    it.effect("unknown profile, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, profile: uniqueName("nowhere") })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("unknown environment, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, environment: "staging" })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("unknown service uuid, without and with a valid token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const path = callPath({ ...fixture, uuid: randomUUID() })
        expectServiceError(yield* callService(path), 404, "not_found")
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))

    it.effect("a last segment that is not a uuid", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (const uuid of ["not-a-uuid", "123", `${fixture.uuid}0`, fixture.uuid.replace(/-/g, "")]) {
          expectServiceError(yield* callService(callPath({ ...fixture, uuid })), 404, "not_found")
          expectServiceError(yield* callService(callPath({ ...fixture, uuid }), { token }), 404, "not_found")
        }
      }))

    it.effect("a service of another profile is not found under this one", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const other = yield* createFixture()
        const path = callPath({ ...other, uuid: fixture.uuid })
        expectServiceError(yield* callService(path, { token }), 404, "not_found")
      }))
  })
})

describe("POST /service/…: the Authorization header (RFC 6750 §3)", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOauth = sharedFixture(createFixture())

    it.effect("oauth service without Authorization → 401 invalid_token, challenge without an error code", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture))
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
        expect(response.headers["www-authenticate"]).toBe(`Bearer realm="service"`)
      }))

    it.effect("a header that is not `Bearer <token>` → 400 invalid_request with the invalid_request challenge", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (
          const authorization of [
            "Basic xyz",
            `Basic ${Buffer.from(`${fixture.clientId}:${fixture.clientSecret}`).toString("base64")}`,
            "Bearer",
            "Bearer ",
            "Bearer a b",
            `Bearer ${token} ${token}`,
            "Token x",
            `Token ${token}`,
            `Bearer,${token}`,
            `Bearer:${token}`,
            `Bearer"${token}"`
          ]
        ) {
          const response = yield* callService(callPath(fixture), { authorization })
          expectServiceError(response, 400, "invalid_request", CHALLENGE.invalidRequest)
        }
      }))

    it.effect("the scheme is case-insensitive: bearer and BEARER", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectEcho(yield* callService(callPath(fixture), { authorization: `bearer ${token}` }), fixture, fixture.clientId)
        expectEcho(yield* callService(callPath(fixture), { authorization: `BEARER ${token}` }), fixture, fixture.clientId)
        expectEcho(yield* callService(callPath(fixture), { authorization: `BeArEr ${token}` }), fixture, fixture.clientId)
      }))

    it.effect("a valid token → 200 with exactly the echo {service_uuid, profile, environment, client_id, body}", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = { amount: 42, nested: { list: [1, "two", null, true], empty: {} }, text: "héllo ☃" }
        const response = yield* callService(callPath(fixture), { token, body: JSON.stringify(body) })
        expectEcho(response, fixture, fixture.clientId, body)
        expect(Object.keys(response.body).sort()).toEqual(["body", "client_id", "environment", "profile", "service_uuid"])
        expect(response.headers["www-authenticate"]).toBeUndefined()
      }))

    it.effect("an empty object body is echoed as {}", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectEcho(yield* callService(callPath(fixture), { token, body: "{}" }), fixture, fixture.clientId, {})
      }))

    it.effect("a token that is not a JWT at all → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        for (const token of ["abc", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", fixture.clientSecret]) {
          expectInvalidToken(yield* callService(callPath(fixture), { token }))
        }
      }))
  })
})

describe("POST /service/…: a token is bound to its service", () => {
  layer(makeTestServer())((it) => {
    it.effect("a token of another service in the same profile and environment → 401 invalid_token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        const other = yield* serviceAt(fixture.profile, fixture.environment)
        expectInvalidToken(yield* callService(callPath(other), { token }))
        // Both tokens still work where they belong.
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        expectEcho(
          yield* callService(callPath(other), { token: yield* issueToken(other) }),
          other,
          other.clientId
        )
      }))

    it.effect("the same uuid in another environment (staging) with its own credential: tokens do not cross", () =>
      Effect.gen(function*() {
        const { fixture: production, token: productionToken } = yield* withToken()
        const staging = yield* serviceAt(production.profile, "staging", production.uuid)
        const stagingToken = yield* issueToken(staging)

        expectInvalidToken(yield* callService(callPath(staging), { token: productionToken }))
        expectInvalidToken(yield* callService(callPath(production), { token: stagingToken }))

        expectEcho(yield* callService(callPath(production), { token: productionToken }), production, production.clientId)
        expectEcho(yield* callService(callPath(staging), { token: stagingToken }), staging, staging.clientId)
      }))

    it.effect("the same environment and uuid in another profile: tokens do not cross", () =>
      Effect.gen(function*() {
        const { fixture: first, token: firstToken } = yield* withToken()
        const second = yield* serviceAt(uniqueName("profile"), first.environment, first.uuid)
        const secondToken = yield* issueToken(second)
        expectInvalidToken(yield* callService(callPath(second), { token: firstToken }))
        expectInvalidToken(yield* callService(callPath(first), { token: secondToken }))
        expectEcho(yield* callService(callPath(second), { token: secondToken }), second, second.clientId)
      }))
  })
})

describe("POST /service/…: revocation takes effect on the very next request", () => {
  layer(makeTestServer())((it) => {
    it.effect("deleting the credential → 401 invalid_token; the other credential's token still works", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        const second = yield* admin.post(`${fixture.servicePath}/credentials`)
        expect(second.status).toBe(201)
        const secondFixture: Fixture = {
          ...fixture,
          clientId: second.body.client_id,
          clientSecret: second.body.client_secret,
          tokenFields: { ...fixture.tokenFields, client_id: second.body.client_id, client_secret: second.body.client_secret }
        }
        const secondToken = yield* issueToken(secondFixture)

        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        expect((yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`)).status).toBe(204)
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        expectInvalidToken(yield* callService(callPath(fixture), { token }))

        expectEcho(yield* callService(callPath(fixture), { token: secondToken }), fixture, secondFixture.clientId)
      }))

    it.effect("deleting the credential through save(remove_credential) → 401 invalid_token", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        const saved = yield* admin.post(`/admin/profiles/${fixture.profile}/save`, {
          changes: [{
            op: "remove_credential",
            environment: fixture.environment,
            service_uuid: fixture.uuid,
            client_id: fixture.clientId
          }]
        })
        expect(saved.status).toBe(200)
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("deleting the service kills the token; recreating the same uuid does not revive it", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        expect((yield* admin.delete(fixture.servicePath)).status).toBe(204)
        expectServiceError(yield* callService(callPath(fixture), { token }), 404, "not_found")

        const recreated = yield* serviceAt(fixture.profile, fixture.environment, fixture.uuid)
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        expectEcho(
          yield* callService(callPath(fixture), { token: yield* issueToken(recreated) }),
          fixture,
          recreated.clientId
        )
      }))

    it.effect("deleting the environment kills the token; recreating it and the service does not revive it", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        expect(
          (yield* admin.delete(`/admin/profiles/${fixture.profile}/environments/${fixture.environment}`)).status
        ).toBe(204)
        expectServiceError(yield* callService(callPath(fixture), { token }), 404, "not_found")

        yield* serviceAt(fixture.profile, fixture.environment, fixture.uuid)
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("deleting the profile kills the token; recreating profile, environment and service does not revive it", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        expect((yield* admin.delete(`/admin/profiles/${fixture.profile}`)).status).toBe(204)
        expectServiceError(yield* callService(callPath(fixture), { token }), 404, "not_found")

        yield* serviceAt(fixture.profile, fixture.environment, fixture.uuid)
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        // The old credential is gone for good: it cannot obtain a new token either.
        expect((yield* tokenRequest(fixture.tokenFields)).status).toBe(401)
      }))
  })
})

describe("POST /service/…: the body must be a JSON object", () => {
  const NOT_OBJECTS = ["[]", "[1,2]", `"text"`, "42", "null", "true", "{", "{\"a\":", "not json", "", "  "]

  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOpen = sharedFixture(createFixture({ authType: "none" }))

    it.effect("authorized, a body that is not a JSON object → 400 invalid_request (no challenge)", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        for (const body of NOT_OBJECTS) {
          const response = yield* callService(callPath(fixture), { token, body })
          expectServiceError(response, 400, "invalid_request")
        }
      }))

    it.effect("authorized, no body at all → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        expectServiceError(yield* callService(callPath(fixture), { token, body: null }), 400, "invalid_request")
      }))

    it.effect("auth_type none: 200 without a token, client_id null in the echo", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        const service = yield* admin.get(`/admin/profiles/${fixture.profile}`)
        expect(service.body.environments[0].services[0].auth_type).toBe("none")
        expectEcho(yield* callService(callPath(fixture), { body: `{"x":1}` }), fixture, null, { x: 1 })
      }))

    it.effect("auth_type none, a body that is not a JSON object → 400 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        for (const body of NOT_OBJECTS) {
          expectServiceError(yield* callService(callPath(fixture), { body }), 400, "invalid_request")
        }
      }))
  })
})

describe("POST /service/…: authentication is checked before the body is read", () => {
  layer(makeTestServer())((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const sharedOauth = sharedFixture(createFixture())

    it.effect("no token and an invalid body → 401 invalid_token (bare challenge), not 400", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        for (const body of ["[]", "{", "null", ""]) {
          expectServiceError(yield* callService(callPath(fixture), { body }), 401, "invalid_token", CHALLENGE.bare)
        }
      }))

    it.effect("a malformed header and an invalid body → 400 with the invalid_request challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture), { authorization: "Basic xyz", body: "{" })
        expectServiceError(response, 400, "invalid_request", CHALLENGE.invalidRequest)
      }))

    it.effect("a bad token and an invalid body → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        expectInvalidToken(yield* callService(callPath(fixture), { token: "a.b.c", body: "[]" }))
      }))
  })
})

describe("POST /service/…: body size limit (maxBodyBytes 1024)", () => {
  layer(makeTestServer({ config: { maxBodyBytes: 1024 } }))((it) => {
    // Every case here only reads its fixture: one per kind for the whole block.
    const withSharedToken = sharedFixture(withToken())
    const sharedOauth = sharedFixture(createFixture())
    const sharedOpen = sharedFixture(createFixture({ authType: "none" }))

    it.effect("authorized, a 2 KB JSON object → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const response = yield* callService(callPath(fixture), { token, body: jsonObjectOfSize(2048) })
        expectServiceError(response, 413, "invalid_request")
      }))

    // SERVER BUG: when an oversized body arrives chunked (no Content-Length) and is still streaming
    // while the server reads it, the server closes the connection without any answer ("socket hang
    // up") instead of 413. A declared Content-Length over the limit is answered 413 (test above).
    // Marked `fails` until fixed: remove `.fails` then.
    it.effect("authorized, a 2 KB body sent chunked (no Content-Length) → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(2048)
        const response = yield* chunkedCall(
          callPath(fixture),
          { authorization: `Bearer ${token}` },
          [body.slice(0, 512), body.slice(512, 1024), body.slice(1024, 1536), body.slice(1536)],
          50
        )
        expectServiceError(response, 413, "invalid_request")
      }))

    it.effect("authorized, exactly 1024 bytes is within the limit → 200", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(1024)
        expect(Buffer.byteLength(body)).toBe(1024)
        expectEcho(yield* callService(callPath(fixture), { token, body }), fixture, fixture.clientId, JSON.parse(body))
      }))

    it.effect("authorized, 1025 bytes → 413 invalid_request", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withSharedToken
        const body = jsonObjectOfSize(1025)
        expect(Buffer.byteLength(body)).toBe(1025)
        expectServiceError(yield* callService(callPath(fixture), { token, body }), 413, "invalid_request")
      }))

    it.effect("no token and a 2 KB body → 401 invalid_token with the bare challenge, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const response = yield* callService(callPath(fixture), { body: jsonObjectOfSize(2048) })
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
      }))

    it.effect("no token and a 2 KB body sent chunked → 401, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const body = jsonObjectOfSize(2048)
        const response = yield* chunkedCall(callPath(fixture), {}, [body.slice(0, 1000), body.slice(1000)])
        expectServiceError(response, 401, "invalid_token", CHALLENGE.bare)
      }))

    it.effect("a bad token and a 2 KB body → 401 invalid_token, not 413", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        expectInvalidToken(yield* callService(callPath(fixture), { token: "a.b.c", body: jsonObjectOfSize(2048) }))
      }))

    it.effect("auth_type none and a 2 KB body → 413 invalid_request", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOpen
        expectServiceError(yield* callService(callPath(fixture), { body: jsonObjectOfSize(2048) }), 413, "invalid_request")
      }))

    it.effect("unknown service and a 2 KB body → 404 not_found", () =>
      Effect.gen(function*() {
        const fixture = yield* sharedOauth
        const path = callPath({ ...fixture, uuid: randomUUID() })
        expectServiceError(yield* callService(path, { body: jsonObjectOfSize(2048) }), 404, "not_found")
      }))
  })
})

describe("POST /service/…: tokens signed by the test (expiry, scope, foreign key)", () => {
  layer(makeTestServer())((it) => {
    /** Signs claims with the server's own key through jose, as the server does. */
    const signReal = (claims: Record<string, unknown>) =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        return yield* Effect.promise(() =>
          new Jose.SignJWT(claims).setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid }).sign(keys.privateKey)
        )
      })

    it.effect("control: a token the test signs with the server's key and real claims → 200", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now) })
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("an expired token (iat and exp in the past) → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now - 7200) })
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a token whose exp is exactly now is expired (now >= exp) → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now - 3600) })
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a valid signature with scope \"other\" → 403 insufficient_scope with its challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now), scope: "other" })
        const response = yield* callService(callPath(fixture), { token })
        expectServiceError(response, 403, "insufficient_scope", CHALLENGE.insufficientScope)
      }))

    it.effect("scopes that only resemble service:call → 403 insufficient_scope", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        for (const scope of ["", "service", "service:calls", "SERVICE:CALL", "service:call:admin"]) {
          const token = yield* signReal({ ...realClaims(fixture, now), scope })
          expectServiceError(
            yield* callService(callPath(fixture), { token }),
            403,
            "insufficient_scope",
            CHALLENGE.insufficientScope
          )
        }
      }))

    it.effect("a scope list that includes service:call (RFC 6749 §3.3) → 200", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now), scope: "other service:call" })
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("live credential, matching data, but signed by another RSA key with the same kid → 401", () =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const { privateKey } = attackerKeyPair()
        const token = signWith(privateKey, realHeader(keys.kid), realClaims(fixture, now))
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        // The same claims and header signed with the real key pass, so only the key made the difference.
        expectEcho(
          yield* callService(callPath(fixture), { token: signWith(keys.privateKey, realHeader(keys.kid), realClaims(fixture, now)) }),
          fixture,
          fixture.clientId
        )
      }))

    it.effect("signed by another key through jose, same kid → 401", () =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const { privateKey } = yield* Effect.promise(() => Jose.generateKeyPair("RS256", { modulusLength: 2048 }))
        const token = yield* Effect.promise(() =>
          new Jose.SignJWT({ ...realClaims(fixture, now) })
            .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid })
            .sign(privateKey)
        )
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))
  })
})

describe("POST /service/…: expiry on the server's clock (TestClock)", () => {
  layer(makeTestServer())((it) => {
    it.effect("a token works until exp - 1 s and is refused from exp on (now >= exp)", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        yield* TestClock.adjust("3599 seconds")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        yield* TestClock.adjust("1 second")
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        // A fresh token works again.
        expectEcho(yield* callService(callPath(fixture), { token: yield* issueToken(fixture) }), fixture, fixture.clientId)
      }))
  })
})
