/**
 * `resource` at `POST /oauth/token` (RFC 8707): the service's call URL names the target instead of
 * profile, environment and service_uuid, or as well as them when they agree; a generic client
 * (oauth4webapi) gets a token with it. Every invalid_target case, and where each stands in the order
 * of checks; requests without `resource` are unchanged (test/TokenEndpointPrecedence.test.ts).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import * as oauth from "oauth4webapi"
import { basicAuthorization, decodeJwt, expectErrorBody, NO_STORE_HEADERS, oauthError } from "./support/Http.js"
import { TEST_ISSUER } from "./support/Tokens.js"
import { admin, createFixture, type Fixture, makeTestServer, serverPort, type TestStorage, tokenRequest } from "../src/testing.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const resourceOf = (fixture: Pick<Fixture, "profile" | "environment" | "uuid">, issuer = TEST_ISSUER) =>
  `${issuer}/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`

const credentialsOf = (fixture: Fixture) => ({
  grant_type: "client_credentials",
  client_id: fixture.clientId,
  client_secret: fixture.clientSecret
})

const invalidTarget = (description: string) => oauthError("invalid_target", description)
const MANY = invalidTarget("Only one resource may be requested")
const UNKNOWN = invalidTarget(
  `The resource is not a service URL of this server: expected ${TEST_ISSUER}/service/{profile}/{environment}/json/{service_uuid}`
)
const CONTRADICTING = invalidTarget("The resource names another service than profile, environment and service_uuid")
const NO_SERVICE = invalidTarget("The resource names no oauth service")
const MISSING = oauthError("invalid_request", "Missing required parameters")

const expectRefused = (response: Parameters<typeof expectErrorBody>[0], status: number, body: ReturnType<typeof oauthError>) => {
  expectErrorBody(response, status, body)
  expect(response.headers).toMatchObject(NO_STORE_HEADERS)
}

const suite = (storage?: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer(storage === undefined ? {} : { storage }))((it) => {
    it.effect("a generic client (oauth4webapi) gets a token for the service its resource names", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const port = yield* serverPort
        // The issuer the test server is configured with, at the address it listens on.
        const as: oauth.AuthorizationServer = { issuer: TEST_ISSUER, token_endpoint: `http://127.0.0.1:${port}/oauth/token` }
        const client: oauth.Client = { client_id: fixture.clientId }
        const options = { [oauth.allowInsecureRequests]: true }
        for (const auth of [oauth.ClientSecretBasic(fixture.clientSecret), oauth.ClientSecretPost(fixture.clientSecret)]) {
          const token = yield* Effect.promise(async () => {
            const response = await oauth.clientCredentialsGrantRequest(
              as,
              client,
              auth,
              new URLSearchParams({ resource: resourceOf(fixture) }),
              options
            )
            return oauth.processClientCredentialsResponse(as, client, response)
          })
          expect(token.expires_in).toBe(3600)
          const claims = decodeJwt(token.access_token).payload
          expect(claims.aud).toBe(resourceOf(fixture))
          expect(claims.data).toEqual({ service_uuid: fixture.uuid, profile: fixture.profile, environment: fixture.environment })
        }
      }))

    it.effect("resource with the fields that name the same service (any uuid casing): a token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const alone = yield* tokenRequest({ ...credentialsOf(fixture), resource: resourceOf(fixture) })
        expect(alone.status).toBe(200)
        const both = yield* tokenRequest({
          ...credentialsOf(fixture),
          profile: fixture.profile,
          environment: fixture.environment,
          service_uuid: fixture.uuid.toUpperCase(),
          resource: resourceOf({ ...fixture, uuid: fixture.uuid.toUpperCase() })
        })
        expect(both.status).toBe(200)
        expect(Object.keys(both.body)).toEqual(["access_token", "token_type", "expires_in", "scope"])
        const partial = yield* tokenRequest({ ...credentialsOf(fixture), profile: fixture.profile, resource: resourceOf(fixture) })
        expect(partial.status).toBe(200)
        const basic = yield* tokenRequest(
          { grant_type: "client_credentials", resource: resourceOf(fixture) },
          { authorization: basicAuthorization(fixture.clientId, fixture.clientSecret) }
        )
        expect(basic.status).toBe(200)
        // An empty resource counts as missing (RFC 6749 §3.1): the fields alone decide.
        expect((yield* tokenRequest({ ...fixture.tokenFields, resource: "" })).status).toBe(200)
      }))

    it.effect("invalid_target: more than one resource", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const body = new URLSearchParams({ ...credentialsOf(fixture), resource: resourceOf(fixture) })
        body.append("resource", resourceOf(fixture))
        expectRefused(yield* tokenRequest(body.toString()), 400, MANY)
      }))

    it.effect("invalid_target: a resource that is not one of this server's service URLs", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const good = resourceOf(fixture)
        for (
          const resource of [
            "not a url",
            "urn:example:service",
            resourceOf(fixture, "https://elsewhere.example"),
            `${good}/`,
            `${good}?x=1`,
            `${good}#part`,
            good.replace("/json/", "/xml/"),
            good.replace("/service/", "/services/"),
            `${TEST_ISSUER}/service/${fixture.profile}/${fixture.environment}/json/not-a-uuid`,
            `${TEST_ISSUER}/service/${fixture.profile}/json/${fixture.uuid}`,
            `${TEST_ISSUER}/service/%2E%2E/${fixture.environment}/json/${fixture.uuid}`
          ]
        ) {
          const response = yield* tokenRequest({ ...credentialsOf(fixture), resource })
          expect([resource, response.status, response.body]).toEqual([resource, 400, UNKNOWN])
        }
      }))

    it.effect("invalid_target: a resource contradicting profile, environment or service_uuid", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const other = yield* createFixture()
        for (
          const fields of [
            { profile: other.profile },
            { environment: "staging" },
            { service_uuid: other.uuid },
            { profile: fixture.profile, environment: fixture.environment, service_uuid: other.uuid }
          ]
        ) {
          const response = yield* tokenRequest({ ...credentialsOf(fixture), ...fields, resource: resourceOf(fixture) })
          expect([fields, response.status, response.body]).toEqual([fields, 400, CONTRADICTING])
        }
      }))

    it.effect("invalid_target: a resource naming no oauth service (unknown profile, environment, service; auth_type none)", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const open = yield* createFixture({ authType: "none" })
        for (
          const target of [
            { ...fixture, profile: `${fixture.profile}-gone` },
            { ...fixture, environment: "staging" },
            { ...fixture, uuid: "00000000-0000-4000-8000-000000000000" },
            open
          ]
        ) {
          const response = yield* tokenRequest({ ...credentialsOf(fixture), resource: resourceOf(target) })
          expect([target.uuid, response.status, response.body]).toEqual([target.uuid, 400, NO_SERVICE])
        }
        // A deleted service too.
        const deleted = yield* createFixture()
        expect((yield* admin.delete(deleted.servicePath)).status).toBe(204)
        expectRefused(yield* tokenRequest({ ...credentialsOf(deleted), resource: resourceOf(deleted) }), 400, NO_SERVICE)
      }))

    it.effect("the order: grant type first, then the resource, then the client fields, then the target, then the client", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const twice = (fields: Record<string, string>) => {
          const body = new URLSearchParams(fields)
          body.append("resource", "x")
          body.append("resource", "y")
          return body.toString()
        }
        expectRefused(yield* tokenRequest(twice({})), 400, MISSING)
        expectRefused(
          yield* tokenRequest(twice({ grant_type: "password" })),
          400,
          oauthError("unsupported_grant_type", "Only client_credentials grant type is supported")
        )
        expectRefused(yield* tokenRequest(twice({ grant_type: "client_credentials" })), 400, MANY)
        expectRefused(yield* tokenRequest({ grant_type: "client_credentials", resource: "x" }), 400, UNKNOWN)
        expectRefused(yield* tokenRequest({ grant_type: "client_credentials", resource: resourceOf(fixture) }), 400, MISSING)
        const gone = { ...fixture, uuid: "00000000-0000-4000-8000-000000000000" }
        expectRefused(
          yield* tokenRequest({
            grant_type: "client_credentials",
            client_id: fixture.clientId,
            client_secret: "wrong",
            resource: resourceOf(gone)
          }),
          400,
          NO_SERVICE
        )
        const wrong = yield* tokenRequest(
          { grant_type: "client_credentials", resource: resourceOf(fixture) },
          { authorization: basicAuthorization(fixture.clientId, "wrong") }
        )
        expectRefused(wrong, 401, oauthError("invalid_client", "Invalid client credentials"))
        expect(wrong.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))
  })

describe("resource indicators: memory storage", () => {
  suite()
})

describe("resource indicators: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("resource indicators: PostgreSQL", () => {
  suite(postgresStorage())
})
