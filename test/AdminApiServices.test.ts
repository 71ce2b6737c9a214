/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: services, every endpoint and its errors.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { rawAdminRequest, unknownClientId } from "./support/Http.js"
import { admin, createFixture, makeTestServer, tokenRequest, uniqueName } from "../src/testing.js"
import {
  TIMESTAMP,
  createEnvironment,
  createService,
  expectError,
  expectNoContent,
  expectStatus,
  findService,
  paths
} from "./support/AdminApi.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe("admin API: services", () => {
  layer(makeTestServer())((it) => {
    it.effect("POST .../services → 201 with a new uuid, the handler defaulting to echo, no credentials", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const first = yield* admin.post(paths.services(profile, environment), { name: "billing", auth_type: "oauth" })
        expect({ status: first.status, body: first.body }).toEqual({
          status: 201,
          body: { uuid: expect.stringMatching(UUID), name: "billing", auth_type: "oauth", handler: { type: "echo" }, credentials: [] }
        })
        const second = yield* admin.post(paths.services(profile, environment), { name: "billing", auth_type: "oauth" })
        expectStatus(second, 201)
        expect(second.body.uuid).not.toBe(first.body.uuid)
      }))

    it.effect("POST .../services without a name → 201 with a default name", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const response = yield* admin.post(paths.services(profile, environment), { auth_type: "none" })
        expect({ status: response.status, body: response.body }).toEqual({
          status: 201,
          body: {
            uuid: expect.stringMatching(UUID),
            name: expect.any(String),
            auth_type: "none",
            handler: { type: "echo" },
            credentials: []
          }
        })
        expect(response.body.name.length).toBeGreaterThan(0)
      }))

    it.effect("POST .../services with a proxy handler → 201 keeping the handler", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const handler = { type: "proxy", url: "https://upstream.example/api" }
        const response = yield* admin.post(paths.services(profile, environment), { auth_type: "oauth", handler })
        expectStatus(response, 201)
        expect(response.body.handler).toEqual(handler)
      }))

    it.effect("PUT .../services/{uuid} → 201 created, then 200 updated; the document follows", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const uuid = randomUUID()
        const created = yield* admin.put(paths.service(profile, environment, uuid), { name: "billing", auth_type: "oauth" })
        expect({ status: created.status, body: created.body }).toEqual({
          status: 201,
          body: { uuid, name: "billing", auth_type: "oauth", handler: { type: "echo" }, credentials: [] }
        })
        const handler = { type: "proxy", url: "http://upstream.example/v2" }
        const updated = yield* admin.put(paths.service(profile, environment, uuid), { name: "ledger", auth_type: "none", handler })
        expect({ status: updated.status, body: updated.body }).toEqual({
          status: 200,
          body: { uuid, name: "ledger", auth_type: "none", handler, credentials: [] }
        })
        const document = yield* admin.get(paths.profile(profile))
        expect(findService(document.body, environment, uuid)).toEqual(updated.body)
      }))

    it.effect("PUT .../services/{uuid} keeps the service's credentials", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const updated = yield* admin.put(fixture.servicePath, { name: "renamed", auth_type: "oauth" })
        expectStatus(updated, 200)
        expect(updated.body.credentials).toEqual([{
          client_id: fixture.clientId,
          created_at: TIMESTAMP,
          expires_at: null,
          last_used_at: null
        }])
        expect((yield* tokenRequest(fixture.tokenFields)).status).toBe(200)
      }))

    it.effect("PUT .../services/{uuid} with a uuid that is not a UUID → 400 invalid_request", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const response = yield* admin.put(paths.service(profile, environment, "not-a-uuid"), { auth_type: "oauth" })
        expectError(response, 400, "invalid_request")
      }))

    it.effect("a service body that is not JSON → 400 invalid_request (POST and PUT)", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        expectError(yield* rawAdminRequest("POST", paths.services(profile, environment), "auth_type=oauth"), 400, "invalid_request")
        expectError(
          yield* rawAdminRequest("PUT", paths.service(profile, environment, randomUUID()), "{\"auth_type\":"),
          400,
          "invalid_request"
        )
      }))

    for (
      const [label, body] of [
        ["an unknown field", { auth_type: "oauth", colour: "red" }],
        ["auth_type missing", { name: "billing" }],
        ["an invalid auth_type", { auth_type: "basic" }],
        ["a proxy handler with an invalid url", { auth_type: "oauth", handler: { type: "proxy", url: "not a url" } }],
        ["a proxy handler with a non-http url", { auth_type: "oauth", handler: { type: "proxy", url: "ftp://upstream.example/" } }],
        ["a proxy handler without url", { auth_type: "oauth", handler: { type: "proxy" } }],
        ["an unknown handler type", { auth_type: "oauth", handler: { type: "lambda" } }],
        ["an empty name", { name: "", auth_type: "oauth" }],
        ["a JSON array", [{ auth_type: "oauth" }]]
      ] as const
    ) {
      it.effect(`a service body with ${label} → 400 invalid_request (POST and PUT)`, () =>
        Effect.gen(function*() {
          const { profile, environment } = yield* createEnvironment
          expectError(yield* admin.post(paths.services(profile, environment), body), 400, "invalid_request")
          const uuid = randomUUID()
          expectError(yield* admin.put(paths.service(profile, environment, uuid), body), 400, "invalid_request")
          // Nothing was created.
          expect((yield* admin.get(paths.profile(profile))).body.environments[0].services).toEqual([])
        }))
    }

    it.effect("an invalid auth_type is described with every allowed value, never with the value sent", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const body = { auth_type: "basic" }
        for (
          const answer of [
            yield* admin.post(paths.services(profile, environment), body),
            yield* admin.put(paths.service(profile, environment, randomUUID()), body)
          ]
        ) {
          expect(answer.status).toBe(400)
          expect(answer.body).toEqual({ error: "invalid_request", error_description: "auth_type: Expected \"oauth\" | \"none\"" })
        }
      }))

    it.effect("services in an unknown profile or environment → 404 not_found", () =>
      Effect.gen(function*() {
        const { profile } = yield* createEnvironment
        const nowhere = uniqueName("nowhere")
        const body = { auth_type: "oauth" }
        expectError(yield* admin.post(paths.services(profile, "staging"), body), 404, "not_found")
        expectError(yield* admin.post(paths.services(nowhere, "production"), body), 404, "not_found")
        expectError(yield* admin.put(paths.service(profile, "staging", randomUUID()), body), 404, "not_found")
        expectError(yield* admin.put(paths.service(nowhere, "production", randomUUID()), body), 404, "not_found")
      }))

    it.effect("DELETE a service → 204; again → 404; an unknown uuid → 404", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expectNoContent(yield* admin.delete(service.path))
        expectError(yield* admin.delete(service.path), 404, "not_found")
        expectError(yield* admin.delete(paths.service(service.profile, service.environment, randomUUID())), 404, "not_found")
        expect((yield* admin.get(paths.profile(service.profile))).body.environments[0].services).toEqual([])
      }))

    it.effect("GET and POST credentials of an unknown service → 404 not_found", () =>
      Effect.gen(function*() {
        const { profile, environment } = yield* createEnvironment
        const path = paths.service(profile, environment, randomUUID())
        expectError(yield* admin.get(`${path}/credentials`), 404, "not_found")
        expectError(yield* admin.post(`${path}/credentials`), 404, "not_found")
        expectError(yield* admin.delete(`${path}/credentials/${unknownClientId()}`), 404, "not_found")
      }))
  })
})
