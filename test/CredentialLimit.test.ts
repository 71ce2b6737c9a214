/**
 * "A service never has more than 2 live credentials", under concurrency, on PostgreSQL: the
 * repository's row locks, and the same rule seen through the admin API.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { randomBytes } from "node:crypto"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CredentialRepo, type ServiceAddress } from "../src/storage/CredentialRepo.js"
import { describeWithPostgres, postgresStorage } from "./support/Databases.js"
import { admin, type JsonResponse, makeTestServer, TEST_ACTOR, uniqueName } from "../src/testing.js"

const NOW = new Date("2026-01-01T00:00:00.000Z")
const newClientId = () => `svc_${randomBytes(16).toString("hex")}` as ClientId

/** A fresh profile and environment with `count` oauth services, created through the admin API. */
const givenServices = (count: number) =>
  Effect.gen(function*() {
    const profile = uniqueName("limit")
    const environment = "production"
    expect((yield* admin.put(`/admin/profiles/${profile}`)).status).toBe(201)
    expect((yield* admin.put(`/admin/profiles/${profile}/environments/${environment}`)).status).toBe(201)
    const services: Array<{ readonly address: ServiceAddress; readonly path: string }> = []
    for (let i = 0; i < count; i++) {
      const created = yield* admin.post(`/admin/profiles/${profile}/environments/${environment}/services`, {
        name: `service-${i}`,
        auth_type: "oauth"
      })
      expect(created.status).toBe(201)
      const uuid: string = created.body.uuid
      services.push({
        address: { profile: profile as ProfileId, environment: environment as EnvironmentName, uuid: uuid as ServiceUuid },
        path: `/admin/profiles/${profile}/environments/${environment}/services/${uuid}`
      })
    }
    return { profile, environment, services }
  })

const listedClientIds = (path: string) =>
  Effect.map(admin.get(`${path}/credentials`), (response) => {
    expect(response.status).toBe(200)
    return (response.body.credentials as Array<{ client_id: string }>).map((c) => c.client_id)
  })

const statuses = (responses: ReadonlyArray<JsonResponse>) => responses.map((r) => r.status).sort()

const expectLimitAnswers = (responses: ReadonlyArray<JsonResponse>, successStatus: number) => {
  const succeeded = responses.filter((r) => r.status === successStatus)
  const refused = responses.filter((r) => r.status !== successStatus)
  expect(succeeded).toHaveLength(2)
  expect(refused).toHaveLength(responses.length - 2)
  for (const response of refused) {
    expect(response.status).toBe(409)
    expect(Object.keys(response.body).sort()).toEqual(["error", "error_description"])
    expect(response.body.error).toBe("credential_limit_exceeded")
  }
  return succeeded
}

describeWithPostgres("the two-credential limit under concurrency (PostgreSQL)", () => {
  layer(makeTestServer({ storage: postgresStorage() }), { excludeTestServices: true, timeout: "60 seconds" })(
    (it) => {
      it.effect("20 concurrent additions in the repository: exactly 2 succeed, 18 fail with CredentialLimitExceeded", () =>
        Effect.gen(function*() {
          const repo = yield* CredentialRepo
          const { services: [service] } = yield* givenServices(1)
          const { address } = service!
          const ids = Array.from({ length: 20 }, newClientId)
          const results = yield* Effect.all(
            ids.map((clientId) =>
              Effect.either(
                repo.applyCredentialChanges(address.profile, [{
                  op: "add_credential",
                  environment: address.environment,
                  service_uuid: address.uuid,
                  client_id: clientId,
                  secret_hash: `hash-${clientId}`
                }], NOW, TEST_ACTOR)
              )
            ),
            { concurrency: "unbounded" }
          )
          const succeeded = ids.filter((_, i) => Either.isRight(results[i]!))
          const failures = results.filter(Either.isLeft).map((result) => result.left._tag)
          expect(succeeded).toHaveLength(2)
          expect(failures).toEqual(Array.from({ length: 18 }, () => "CredentialLimitExceeded"))
          const stored = Option.getOrThrow(yield* repo.getService(address))
          expect(stored.credentials.map((c) => c.client_id).sort()).toEqual([...succeeded].sort())
        }))

      it.effect("20 concurrent POST .../credentials: two 201, eighteen 409 credential_limit_exceeded, 2 listed", () =>
        Effect.gen(function*() {
          const { services: [service] } = yield* givenServices(1)
          const responses = yield* Effect.all(
            Array.from({ length: 20 }, () => admin.post(`${service!.path}/credentials`)),
            { concurrency: "unbounded" }
          )
          const created = expectLimitAnswers(responses, 201)
          const listed = yield* listedClientIds(service!.path)
          expect(listed.sort()).toEqual(created.map((r) => r.body.client_id as string).sort())
        }))

      it.effect("10 concurrent saves each adding 1 credential: two succeed, eight answer 409, 2 listed", () =>
        Effect.gen(function*() {
          const { profile, environment, services: [service] } = yield* givenServices(1)
          const responses = yield* Effect.all(
            Array.from({ length: 10 }, () =>
              admin.post(`/admin/profiles/${profile}/save`, {
                changes: [{ op: "add_credential", environment, service_uuid: service!.address.uuid }]
              })),
            { concurrency: "unbounded" }
          )
          const saved = expectLimitAnswers(responses, 200)
          const created = saved.map((r) => {
            expect(r.body.created).toHaveLength(1)
            expect(r.body.removed).toEqual([])
            return r.body.created[0].client_id as string
          })
          expect((yield* listedClientIds(service!.path)).sort()).toEqual(created.sort())
        }))

      it.effect("10 concurrent saves touching two services in either order neither deadlock nor exceed the limit", () =>
        Effect.gen(function*() {
          const { profile, environment, services } = yield* givenServices(2)
          const [first, second] = services.map((s) => ({ op: "add_credential", environment, service_uuid: s.address.uuid }))
          const responses = yield* Effect.all(
            Array.from({ length: 10 }, (_, i) =>
              admin.post(`/admin/profiles/${profile}/save`, { changes: i % 2 === 0 ? [first, second] : [second, first] })),
            { concurrency: "unbounded" }
          )
          expect(statuses(responses)).toEqual([200, 200, 409, 409, 409, 409, 409, 409, 409, 409])
          expectLimitAnswers(responses, 200)
          for (const service of services) {
            expect(yield* listedClientIds(service.path)).toHaveLength(2)
          }
        }))
    }
  )
})
