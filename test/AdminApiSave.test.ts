/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: the all-or-nothing profile save
 * (`POST /admin/profiles/{profile}/save`).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { rawAdminRequest, unknownClientId } from "./support/Http.js"
import { admin, createFixture, makeTestServer, uniqueName } from "../src/testing.js"
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
  paths,
  tokenFieldsFor
} from "./support/AdminApi.js"

describe("admin API: POST /admin/profiles/{profile}/save", () => {
  const add = (service: { environment: string; uuid: string }) =>
    ({ op: "add_credential", environment: service.environment, service_uuid: service.uuid }) as const
  const remove = (service: { environment: string; uuid: string }, clientId: string) =>
    ({ op: "remove_credential", environment: service.environment, service_uuid: service.uuid, client_id: clientId }) as const

  layer(makeTestServer())((it) => {
    it.effect("two additions on an empty service → 200; each created item carries its secret, which works", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const response = yield* admin.post(paths.save(service.profile), { changes: [add(service), add(service)] })
        const created = {
          environment: service.environment,
          service_uuid: service.uuid,
          client_id: expect.stringMatching(CLIENT_ID),
          client_secret: expect.stringMatching(CLIENT_SECRET),
          created_at: TIMESTAMP,
          token_endpoint_auth_method: "client_secret_basic"
        }
        expect({ status: response.status, body: response.body }).toEqual({
          status: 200,
          body: { created: [created, created], removed: [] }
        })
        const [first, second] = response.body.created as Array<{ client_id: string; client_secret: string }>
        expect(first!.client_id).not.toBe(second!.client_id)
        expect(yield* clientIds(service.path)).toEqual([first!.client_id, second!.client_id].sort())
        for (const item of [first!, second!]) {
          yield* expectTokenStatus(tokenFieldsFor(service, { clientId: item.client_id, clientSecret: item.client_secret }), 200)
        }
      }))

    it.effect("an empty list of changes → 200 with nothing created or removed", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const response = yield* admin.post(paths.save(service.profile), { changes: [] })
        expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { created: [], removed: [] } })
      }))

    it.effect("a save that would leave 3 credentials → 409 credential_limit_exceeded, nothing applied", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const existing = yield* addCredential(service.path)
        const response = yield* admin.post(paths.save(service.profile), { changes: [add(service), add(service)] })
        expectError(response, 409, "credential_limit_exceeded")
        expect(yield* clientIds(service.path)).toEqual([existing.clientId])
      }))

    it.effect("all or nothing across services: one service over the limit → 409, the other is untouched", () =>
      Effect.gen(function*() {
        const full = yield* createService()
        yield* addCredential(full.path)
        yield* addCredential(full.path)
        const created = yield* admin.post(paths.services(full.profile, full.environment), { name: "ledger", auth_type: "oauth" })
        expectStatus(created, 201)
        const empty = { ...full, uuid: created.body.uuid as string, path: paths.service(full.profile, full.environment, created.body.uuid) }
        const before = yield* clientIds(full.path)

        const response = yield* admin.post(paths.save(full.profile), { changes: [add(empty), add(empty), add(full)] })
        expectError(response, 409, "credential_limit_exceeded")
        expect(yield* clientIds(empty.path)).toEqual([])
        expect(yield* clientIds(full.path)).toEqual(before)
      }))

    it.effect("removing a credential that is not live → 404 not_found, nothing applied", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const response = yield* admin.post(paths.save(service.profile), {
          changes: [add(service), remove(service, unknownClientId())]
        })
        expectError(response, 404, "not_found")
        expect(yield* clientIds(service.path)).toEqual([])
      }))

    it.effect("removing an already deleted credential → 404 not_found, nothing applied", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const service = { environment: fixture.environment, uuid: fixture.uuid }
        const kept = yield* addCredential(fixture.servicePath)
        expectNoContent(yield* admin.delete(`${fixture.servicePath}/credentials/${fixture.clientId}`))
        const response = yield* admin.post(paths.save(fixture.profile), {
          changes: [remove(service, kept.clientId), remove(service, fixture.clientId)]
        })
        expectError(response, 404, "not_found")
        expect(yield* clientIds(fixture.servicePath)).toEqual([kept.clientId])
      }))

    it.effect("removing another service's credential → 404 not_found, nothing applied", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const other = yield* createFixture()
        const response = yield* admin.post(paths.save(fixture.profile), {
          changes: [remove({ environment: fixture.environment, uuid: fixture.uuid }, other.clientId)]
        })
        expectError(response, 404, "not_found")
        yield* expectTokenStatus(other.tokenFields, 200)
      }))

    for (const order of ["remove, add", "add, remove"] as const) {
      it.effect(`at 2 credentials, ${order} in one save → 200: the removal is applied first`, () =>
        Effect.gen(function*() {
          const service = yield* createService()
          const old = yield* addCredential(service.path)
          const kept = yield* addCredential(service.path)
          const changes = order === "remove, add"
            ? [remove(service, old.clientId), add(service)]
            : [add(service), remove(service, old.clientId)]
          const response = yield* admin.post(paths.save(service.profile), { changes })
          expect({ status: response.status, body: response.body }).toEqual({
            status: 200,
            body: {
              created: [{
                environment: service.environment,
                service_uuid: service.uuid,
                client_id: expect.stringMatching(CLIENT_ID),
                client_secret: expect.stringMatching(CLIENT_SECRET),
                created_at: TIMESTAMP,
                token_endpoint_auth_method: "client_secret_basic"
              }],
              removed: [{ environment: service.environment, service_uuid: service.uuid, client_id: old.clientId }]
            }
          })
          const fresh = response.body.created[0]
          expect(yield* clientIds(service.path)).toEqual([kept.clientId, fresh.client_id].sort())
          yield* expectTokenStatus(tokenFieldsFor(service, old), 401, "invalid_client")
          yield* expectTokenStatus(tokenFieldsFor(service, kept), 200)
          yield* expectTokenStatus(tokenFieldsFor(service, { clientId: fresh.client_id, clientSecret: fresh.client_secret }), 200)
        }))
    }

    it.effect("the same credential removed twice → 400 invalid_request, nothing applied", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const service = { environment: fixture.environment, uuid: fixture.uuid }
        const response = yield* admin.post(paths.save(fixture.profile), {
          changes: [remove(service, fixture.clientId), remove(service, fixture.clientId)]
        })
        expectError(response, 400, "invalid_request")
        expect(yield* clientIds(fixture.servicePath)).toEqual([fixture.clientId])
      }))

    for (
      const [label, body] of [
        [
          "an invalid op",
          (s: { environment: string; uuid: string }) => ({
            changes: [{ op: "rotate_credential", environment: s.environment, service_uuid: s.uuid }]
          })
        ],
        [
          "a change without service_uuid",
          (s: { environment: string; uuid: string }) => ({ changes: [{ op: "add_credential", environment: s.environment }] })
        ],
        [
          "a remove without client_id",
          (s: { environment: string; uuid: string }) => ({
            changes: [{ op: "remove_credential", environment: s.environment, service_uuid: s.uuid }]
          })
        ],
        ["no changes field", () => ({})],
        ["changes not an array", () => ({ changes: "all" })],
        ["an unknown top-level field", (s: { environment: string; uuid: string }) => ({ changes: [add(s)], dry_run: true })]
      ] as const
    ) {
      it.effect(`a save with ${label} → 400 invalid_request, nothing applied`, () =>
        Effect.gen(function*() {
          const service = yield* createService()
          expectError(yield* admin.post(paths.save(service.profile), body(service)), 400, "invalid_request")
          expect(yield* clientIds(service.path)).toEqual([])
        }))
    }

    it.effect("a save body that is not JSON → 400 invalid_request", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expectError(yield* rawAdminRequest("POST", paths.save(service.profile), "changes=[]"), 400, "invalid_request")
      }))

    it.effect("a save on an unknown profile, or naming an unknown service → 404 not_found", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expectError(yield* admin.post(paths.save(uniqueName("nowhere")), { changes: [add(service)] }), 404, "not_found")
        const response = yield* admin.post(paths.save(service.profile), {
          changes: [add(service), add({ environment: service.environment, uuid: randomUUID() })]
        })
        expectError(response, 404, "not_found")
        expect(yield* clientIds(service.path)).toEqual([])
      }))
  })
})
