/**
 * `POST /service/{profile}/{env}/json/{uuid}` over HTTP, as docs/contract.md §2 states it: the binding of a token to its
 * service, and instant revocation.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { admin, type Fixture, fixtureOf, issueToken, makeTestServer, tokenRequest, uniqueName } from "../src/testing.js"
import { callPath, callService, expectEcho, expectInvalidToken, expectServiceError } from "./support/Tokens.js"
import { withToken } from "./support/ServiceCall.js"

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
