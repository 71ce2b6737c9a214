/**
 * `POST /oauth/token` over HTTP, as docs/contract.md §1 states it: the precedence table row by row (and
 * between rows).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { oauthError, unknownClientId } from "./support/Http.js"
import { admin, createFixture, makeTestServer, tokenRequest, uniqueName } from "../src/testing.js"
import { INVALID_CLIENT, MISSING, REQUIRED_FIELDS, expectError, expectToken, without, wrongSecret } from "./support/TokenEndpoint.js"

const UNSUPPORTED_GRANT = oauthError("unsupported_grant_type", "Only client_credentials grant type is supported")

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

    // Row 3
    for (const field of REQUIRED_FIELDS.filter((name) => name !== "grant_type")) {
      it.effect(`row 3: ${field} missing → 400 invalid_request`, () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          expectError(yield* tokenRequest(without(fixture.tokenFields, field)), 400, MISSING)
        }))

      it.effect(`row 3: ${field} sent empty (\`${field}=\`) counts as missing`, () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          expectError(yield* tokenRequest({ ...fixture.tokenFields, [field]: "" }), 400, MISSING)
        }))
    }

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
