/**
 * Discovery and operations over HTTP, as docs/contract.md §4 states them: the JWKS, the RFC 8414 metadata,
 * health and readiness, the served OpenAPI document, and the JSON 404 for unknown paths.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { parse } from "yaml"
import { decodeJwt, request, verifyRs256 } from "./support/Http.js"
import * as client from "openid-client"
import { createFixture, type JsonResponse, makeTestServer, send, serverPort, tokenRequest } from "../src/testing.js"

const ISSUER = "http://issuer.test"

const get = (path: string) => send(HttpClientRequest.get(path))

const expectJson = (response: JsonResponse, status: number) => {
  expect(response.status).toBe(status)
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}

/** Every endpoint of docs/contract.md §1–§4, with path parameters as OpenAPI writes them. */
const CONTRACT_ENDPOINTS: ReadonlyArray<readonly [string, string]> = [
  ["post", "/oauth/token"],
  ["post", "/service/{}/{}/json/{}"],
  ["get", "/admin/profiles"],
  ["put", "/admin/profiles/{}"],
  ["get", "/admin/profiles/{}"],
  ["delete", "/admin/profiles/{}"],
  ["put", "/admin/profiles/{}/environments/{}"],
  ["delete", "/admin/profiles/{}/environments/{}"],
  ["post", "/admin/profiles/{}/environments/{}/services"],
  ["put", "/admin/profiles/{}/environments/{}/services/{}"],
  ["delete", "/admin/profiles/{}/environments/{}/services/{}"],
  ["get", "/admin/profiles/{}/environments/{}/services/{}/credentials"],
  ["post", "/admin/profiles/{}/environments/{}/services/{}/credentials"],
  ["delete", "/admin/profiles/{}/environments/{}/services/{}/credentials/{}"],
  ["post", "/admin/profiles/{}/save"],
  ["get", "/admin/keys"],
  ["post", "/admin/keys/rotate"],
  ["get", "/.well-known/jwks.json"],
  ["get", "/.well-known/oauth-authorization-server"],
  ["get", "/healthz"],
  ["get", "/readyz"],
  ["get", "/openapi.yaml"]
]

// `layer(...)`, not `it.layer(...)`: in @effect/vitest 0.30 the first `it.layer` call overwrites
// the shared `it.layer` with its nested form, so a second describe block would nest its server in
// the first one's (one listening socket answered by several apps, sharing one store).
describe("GET /.well-known/jwks.json", () => {
  layer(makeTestServer())((it) => {
    it.effect("publishes RSA signing keys {kty, kid, alg: RS256, use: sig, n, e}", () =>
      Effect.gen(function*() {
        const response = yield* get("/.well-known/jwks.json")
        expectJson(response, 200)
        expect(Object.keys(response.body)).toEqual(["keys"])
        expect(response.body.keys.length).toBeGreaterThan(0)
        for (const key of response.body.keys) {
          expect(key).toEqual({
            kty: "RSA",
            kid: expect.any(String),
            alg: "RS256",
            use: "sig",
            n: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
            e: expect.stringMatching(/^[A-Za-z0-9_-]+$/)
          })
          expect(Buffer.from(key.n, "base64url").length * 8).toBeGreaterThanOrEqual(2048)
        }
        const kids = response.body.keys.map((key: { kid: string }) => key.kid)
        expect(new Set(kids).size).toBe(kids.length)
      }))

    it.effect("never publishes private key members", () =>
      Effect.gen(function*() {
        const response = yield* get("/.well-known/jwks.json")
        for (const key of response.body.keys) {
          for (const member of ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]) expect(key).not.toHaveProperty(member)
        }
      }))

    it.effect("verifies the tokens the token endpoint issues", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const issued = yield* tokenRequest(fixture.tokenFields)
        expect(issued.status).toBe(200)
        const token: string = issued.body.access_token
        const keys = (yield* get("/.well-known/jwks.json")).body.keys
        const key = keys.find((candidate: { kid: string }) => candidate.kid === decodeJwt(token).header.kid)
        expect(key).toBeDefined()
        expect(verifyRs256(token, key)).toBe(true)
      }))
  })
})

describe("GET /.well-known/oauth-authorization-server (RFC 8414)", () => {
  layer(makeTestServer())((it) => {
    it.effect("names the issuer, the token endpoint, the JWKS and what the server supports", () =>
      Effect.gen(function*() {
        const response = yield* get("/.well-known/oauth-authorization-server")
        expectJson(response, 200)
        expect(response.body).toMatchObject({
          issuer: ISSUER,
          token_endpoint: `${ISSUER}/oauth/token`,
          jwks_uri: `${ISSUER}/.well-known/jwks.json`,
          grant_types_supported: ["client_credentials"],
          token_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic", "private_key_jwt"],
          token_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA"],
          dpop_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA"],
          scopes_supported: ["service:call"],
          revocation_endpoint: `${ISSUER}/oauth/revoke`,
          revocation_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic", "private_key_jwt"],
          revocation_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA"],
          introspection_endpoint: `${ISSUER}/oauth/introspect`,
          // A credential allowed to introspect authenticates as at the token endpoint. Only registered
          // method names (IANA "OAuth Token Endpoint Authentication Methods"): the admin Bearer token is none.
          introspection_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic", "private_key_jwt"],
          introspection_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256", "EdDSA"]
        })
      }))

    it.effect("matches the iss of issued tokens", () =>
      Effect.gen(function*() {
        const metadata = (yield* get("/.well-known/oauth-authorization-server")).body
        const fixture = yield* createFixture()
        const issued = yield* tokenRequest(fixture.tokenFields)
        expect(decodeJwt(issued.body.access_token).payload.iss).toBe(metadata.issuer)
      }))
  })
})

describe("GET /.well-known/openid-configuration: not served, pointing at RFC 8414", () => {
  const POINTER = {
    error: "not_found",
    error_description: "This is an OAuth 2.0 authorization server, not an OpenID Connect provider: its metadata " +
      "is at /.well-known/oauth-authorization-server (RFC 8414). With openid-client, discover it with " +
      "algorithm: \"oauth2\"."
  }
  layer(makeTestServer())((it) => {
    it.effect("a 404 that names the RFC 8414 metadata and openid-client's algorithm", () =>
      Effect.gen(function*() {
        const response = yield* get("/.well-known/openid-configuration")
        expectJson(response, 404)
        expect(response.body).toEqual(POINTER)
        // Another method there is an unknown endpoint as anywhere else.
        const posted = yield* request("POST", "/.well-known/openid-configuration")
        expect({ status: posted.status, body: posted.body }).toEqual({
          status: 404,
          body: { error: "not_found", error_description: "No POST endpoint at this path" }
        })
      }))

    it.effect("openid-client's default (OpenID Connect) discovery fails with that pointer, not a bare 404", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        // openid-client says "unexpected HTTP response status code" and keeps the answer as its cause.
        const body = yield* Effect.promise(() =>
          client.discovery(new URL(`http://127.0.0.1:${port}`), "svc", undefined, undefined, {
            execute: [client.allowInsecureRequests]
          }).then(
            () => undefined,
            (error: { readonly cause?: unknown }) => error.cause instanceof Response ? error.cause.json() : String(error)
          )
        )
        expect(body).toEqual(POINTER)
      }))
  })
})

describe("GET /.well-known/oauth-authorization-server with another ISSUER", () => {
  layer(makeTestServer({ config: { issuer: "https://auth.example.com/tenant-a" } }))((it) => {
    it.effect("follows the configured issuer, including a path", () =>
      Effect.gen(function*() {
        const response = yield* get("/.well-known/oauth-authorization-server")
        expectJson(response, 200)
        expect(response.body).toMatchObject({
          issuer: "https://auth.example.com/tenant-a",
          token_endpoint: "https://auth.example.com/tenant-a/oauth/token",
          jwks_uri: "https://auth.example.com/tenant-a/.well-known/jwks.json"
        })
      }))
  })
})

describe("operations: health, readiness, OpenAPI, unknown paths", () => {
  layer(makeTestServer())((it) => {
    it.effect("GET /healthz → 200", () =>
      Effect.gen(function*() {
        expect((yield* get("/healthz")).status).toBe(200)
      }))

    it.effect("GET /readyz → 200 while the database answers", () =>
      Effect.gen(function*() {
        expect((yield* get("/readyz")).status).toBe(200)
      }))

    it.effect("GET /openapi.yaml → 200, YAML, describing POST /oauth/token", () =>
      Effect.gen(function*() {
        const response = yield* get("/openapi.yaml")
        expect(response.status).toBe(200)
        expect(response.headers["content-type"]).toMatch(/^(application|text)\/(x-)?yaml\b/)
        expect(response.text).toContain("/oauth/token")
        const document = parse(response.text)
        expect(document.openapi).toMatch(/^3\./)
        expect(document.paths["/oauth/token"].post.requestBody.content).toHaveProperty(
          "application/x-www-form-urlencoded"
        )
      }))

    it.effect("the OpenAPI document describes every endpoint of the contract", () =>
      Effect.gen(function*() {
        const document = parse((yield* get("/openapi.yaml")).text)
        const documented = new Set<string>()
        for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
          for (const method of Object.keys(operations)) documented.add(`${method} ${path.replace(/\{[^}]*\}/g, "{}")}`)
        }
        const missing = CONTRACT_ENDPOINTS.map(([method, path]) => `${method} ${path}`).filter((e) => !documented.has(e))
        expect(missing).toEqual([])
      }))

    it.effect("the OpenAPI document lists every error status of the token endpoint", () =>
      Effect.gen(function*() {
        const document = parse((yield* get("/openapi.yaml")).text)
        const responses = Object.keys(document.paths["/oauth/token"].post.responses)
        for (const status of ["200", "400", "401", "413"]) expect(responses).toContain(status)
      }))

    it.effect("an unknown path → 404 {error: not_found, error_description}", () =>
      Effect.gen(function*() {
        // (A known path with another method is 405: see MethodNotAllowed.test.ts.)
        for (const [method, path] of [["GET", "/no/such/path"], ["POST", "/oauth/tokens"], ["DELETE", "/healthzz"]] as const) {
          const response = yield* request(method, path)
          expectJson(response, 404)
          expect(response.body).toEqual({ error: "not_found", error_description: expect.any(String) })
        }
      }))
  })
})
