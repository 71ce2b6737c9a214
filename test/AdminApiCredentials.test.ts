/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: credentials, the credential limit, and secrets
 * that are shown once.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { rawAdminRequest, unknownClientId } from "./support/Http.js"
import { admin, createFixture, makeTestServer } from "../src/testing.js"
import {
  CLIENT_ID,
  CLIENT_SECRET,
  TIMESTAMP,
  addCredential,
  clientIds,
  createService,
  expectError,
  expectNoContent,
  expectStatus,
  expectTokenStatus,
  findService,
  listCredentials,
  paths,
  tokenFieldsFor
} from "./support/AdminApi.js"

describe("admin API: credentials", () => {
  layer(makeTestServer())((it) => {
    it.effect("POST .../credentials → 201 {client_id, client_secret, created_at, token_endpoint_auth_method}", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const response = yield* admin.post(`${service.path}/credentials`)
        expect({ status: response.status, body: response.body }).toEqual({
          status: 201,
          body: {
            client_id: expect.stringMatching(CLIENT_ID),
            client_secret: expect.stringMatching(CLIENT_SECRET),
            created_at: TIMESTAMP,
            token_endpoint_auth_method: "client_secret_basic"
          }
        })
        expect(Buffer.from(response.body.client_secret, "base64url").toString("base64url")).toBe(response.body.client_secret)
      }))

    it.effect("the credential list shows client_id, created_at and last_used_at, never the secret", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const first = yield* addCredential(service.path)
        const second = yield* addCredential(service.path)
        const response = yield* admin.get(`${service.path}/credentials`)
        expectStatus(response, 200)
        expect(response.body).toEqual({
          credentials: [
            { client_id: first.clientId, created_at: TIMESTAMP, expires_at: null, last_used_at: null },
            { client_id: second.clientId, created_at: TIMESTAMP, expires_at: null, last_used_at: null }
          ]
        })
        expect(response.text).not.toContain(first.clientSecret)
        expect(response.text).not.toContain(second.clientSecret)
        expect(response.text).not.toContain("client_secret")
      }))

    it.effect("a third credential → 409 credential_limit_exceeded, and the list is unchanged", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        yield* addCredential(service.path)
        yield* addCredential(service.path)
        const before = yield* clientIds(service.path)
        expectError(yield* admin.post(`${service.path}/credentials`), 409, "credential_limit_exceeded")
        expect(yield* clientIds(service.path)).toEqual(before)
      }))

    it.effect("DELETE a credential → 204, then 404; it is no longer listed and its client can no longer get tokens", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const path = `${fixture.servicePath}/credentials/${fixture.clientId}`
        expectNoContent(yield* admin.delete(path))
        expectError(yield* admin.delete(path), 404, "not_found")
        expect(yield* listCredentials(fixture.servicePath)).toEqual([])
        yield* expectTokenStatus(fixture.tokenFields, 401, "invalid_client")
      }))

    it.effect("after a DELETE at the limit a new credential can be added, with a new client id", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const first = yield* addCredential(service.path)
        const second = yield* addCredential(service.path)
        expectNoContent(yield* admin.delete(`${service.path}/credentials/${first.clientId}`))
        const third = yield* addCredential(service.path)
        expect([first.clientId, second.clientId]).not.toContain(third.clientId)
        expect(yield* clientIds(service.path)).toEqual([second.clientId, third.clientId].sort())
      }))

    it.effect("DELETE an unknown client id, or another service's credential → 404, and nothing is deleted", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const other = yield* createFixture()
        expectError(yield* admin.delete(`${fixture.servicePath}/credentials/${unknownClientId()}`), 404, "not_found")
        expectError(yield* admin.delete(`${fixture.servicePath}/credentials/not-a-client-id`), 404, "not_found")
        expectError(yield* admin.delete(`${fixture.servicePath}/credentials/${other.clientId}`), 404, "not_found")
        yield* expectTokenStatus(other.tokenFields, 200)
        yield* expectTokenStatus(fixture.tokenFields, 200)
      }))

    it.effect("adding a credential to an auth_type none service sets its auth_type to oauth", () =>
      Effect.gen(function*() {
        const service = yield* createService({ name: "open", auth_type: "none" })
        const credential = yield* addCredential(service.path)
        const document = yield* admin.get(paths.profile(service.profile))
        expect(findService(document.body, service.environment, service.uuid)).toMatchObject({
          auth_type: "oauth",
          credentials: [{ client_id: credential.clientId, created_at: TIMESTAMP, expires_at: null, last_used_at: null }]
        })
        yield* expectTokenStatus(tokenFieldsFor(service, credential), 200)
      }))

    it.effect("POST .../credentials with a body that is not JSON → 400 invalid_request, nothing created", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expectError(yield* rawAdminRequest("POST", `${service.path}/credentials`, "{not json"), 400, "invalid_request")
        expect(yield* listCredentials(service.path)).toEqual([])
      }))

    // SERVER DEVIATION: the `{}` body lets unknown fields through; a credential is created (201).
    it.effect("POST .../credentials with an unknown field → 400 invalid_request, nothing created", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expectError(yield* admin.post(`${service.path}/credentials`, { client_id: unknownClientId() }), 400, "invalid_request")
        expect(yield* listCredentials(service.path)).toEqual([])
      }))
  })
})

describe("admin API: secrets are shown once", () => {
  layer(makeTestServer())((it) => {
    it.effect("no GET answer ever contains a secret, from POST or from save", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const saved = yield* admin.post(paths.save(fixture.profile), {
          changes: [{ op: "add_credential", environment: fixture.environment, service_uuid: fixture.uuid }]
        })
        expectStatus(saved, 200)
        const secrets = [fixture.clientSecret, saved.body.created[0].client_secret as string]
        yield* expectTokenStatus(fixture.tokenFields, 200)

        const answers = [
          yield* admin.get(paths.profile(fixture.profile)),
          yield* admin.get("/admin/profiles"),
          yield* admin.get(`${fixture.servicePath}/credentials`)
        ]
        for (const answer of answers) {
          expectStatus(answer, 200)
          for (const secret of secrets) expect(answer.text).not.toContain(secret)
          expect(answer.text).not.toContain("client_secret")
        }
        // The client ids, on the other hand, stay visible.
        expect(answers[0]!.text).toContain(fixture.clientId)
        expect(answers[0]!.text).toContain(saved.body.created[0].client_id)
      }))

    it.effect("PUT answers (profile, environment, service) never contain a secret either", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const answers = [
          yield* admin.put(paths.profile(fixture.profile)),
          yield* admin.put(paths.environment(fixture.profile, fixture.environment)),
          yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth" })
        ]
        for (const answer of answers) {
          expectStatus(answer, 200)
          expect(answer.text).not.toContain(fixture.clientSecret)
          expect(answer.text).not.toContain("client_secret")
        }
      }))
  })
})
