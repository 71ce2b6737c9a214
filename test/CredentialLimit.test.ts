/**
 * "A service never has more than 2 live credentials", under concurrency, on PostgreSQL: the
 * repository's row locks, and the same rule seen through the admin API.
 *
 * The concurrent writes queue on row locks; on a busy machine the last of them can wait longer than
 * the storage timeout (1.5 s) and be answered 503 temporarily_unavailable, which a client retries.
 * So do these tests: a 503 is sent again until it is answered otherwise. Any other answer (a 500
 * from a deadlock, a third credential) fails them. On a database of its own, so that the writes of
 * other test files never hold the lock these queue on.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { randomBytes } from "node:crypto"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CatalogueQueries } from "../src/catalogue/CatalogueQueries.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import { type ServiceAddress } from "../src/domain/ServiceAddress.js"
import { describeWithPostgres, isolatedPostgresStorage } from "./support/Databases.js"
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

/** How often a request answered 503 (the storage timeout) is sent again. */
const RETRIES = 20

/** Answers of concurrent requests, each sent again while it is answered 503; whether any was. */
interface Answers {
  readonly responses: ReadonlyArray<JsonResponse>
  readonly retried: boolean
}

/**
 * `request` sent `count` times at once; each one answered 503 temporarily_unavailable (the storage
 * timeout on a busy machine) is sent again, as a client would, until it is answered otherwise.
 */
const concurrently = <R>(count: number, request: (i: number) => Effect.Effect<JsonResponse, never, R>) =>
  Effect.gen(function*() {
    let retried = false
    const persist = (i: number) =>
      Effect.gen(function*() {
        for (let attempt = 0;; attempt++) {
          const response = yield* request(i)
          if (response.status !== 503 || attempt === RETRIES) return response
          expect(response.body?.error, response.text).toBe("temporarily_unavailable")
          retried = true
        }
      })
    const responses = yield* Effect.all(Array.from({ length: count }, (_, i) => persist(i)), { concurrency: "unbounded" })
    return { responses, retried } satisfies Answers
  })

/**
 * Exactly two successes, the rest 409 credential_limit_exceeded. A request answered 503 may still
 * have committed behind its answer (the timeout does not wait for the COMMIT), and its retry is then
 * refused: after a retry, at most two successes, and the listing (checked by the caller) holds two.
 */
const expectLimitAnswers = ({ responses, retried }: Answers, successStatus: number) => {
  const succeeded = responses.filter((r) => r.status === successStatus)
  const refused = responses.filter((r) => r.status !== successStatus)
  if (retried) expect(succeeded.length).toBeLessThanOrEqual(2)
  else expect(succeeded).toHaveLength(2)
  expect(refused).toHaveLength(responses.length - succeeded.length)
  for (const response of refused) {
    expect(response.status, response.text).toBe(409)
    expect(Object.keys(response.body).sort()).toEqual(["error", "error_description"])
    expect(response.body.error).toBe("credential_limit_exceeded")
  }
  return succeeded
}

/** The listed credentials of a service after a race: two, and every success among them. */
const expectListedAfter = (listed: ReadonlyArray<string>, created: ReadonlyArray<string>) => {
  expect(listed).toHaveLength(2)
  for (const clientId of created) expect(listed).toContain(clientId)
}

describeWithPostgres("the two-credential limit under concurrency (PostgreSQL)", () => {
  layer(makeTestServer({ storage: isolatedPostgresStorage() }), { excludeTestServices: true })(
    (it) => {
      it.effect("20 concurrent additions in the repository: exactly 2 succeed, 18 fail with CredentialLimitExceeded", () =>
        Effect.gen(function*() {
          const repo = yield* CatalogueWrites
          const { services: [service] } = yield* givenServices(1)
          const { address } = service!
          const ids = Array.from({ length: 20 }, newClientId)
          let retried = false
          const results = yield* Effect.all(
            ids.map((clientId) =>
              Effect.either(
                repo.applyCredentialChanges(
                  address.profile,
                  [{
                    op: "add_credential",
                    environment: address.environment,
                    service_uuid: address.uuid,
                    client_id: clientId,
                    secret_hash: `hash-${clientId}`
                  }],
                  NOW,
                  TEST_ACTOR
                ).pipe(
                  // The storage timeout on a busy machine: tried again, as the admin API's caller would.
                  Effect.tapError((error) => Effect.sync(() => void (retried ||= error._tag === "StorageUnavailable"))),
                  Effect.retry({ times: RETRIES, while: (error) => error._tag === "StorageUnavailable" })
                )
              )
            ),
            { concurrency: "unbounded" }
          )
          const succeeded = ids.filter((_, i) => Either.isRight(results[i]!))
          const failures = results.filter(Either.isLeft).map((result) => result.left._tag)
          if (retried) expect(succeeded.length).toBeLessThanOrEqual(2)
          else expect(succeeded).toHaveLength(2)
          expect(failures).toEqual(Array.from({ length: 20 - succeeded.length }, () => "CredentialLimitExceeded"))
          const stored = Option.getOrThrow(yield* (yield* CatalogueQueries).getService(address))
          expectListedAfter(stored.credentials.map((c) => c.client_id), succeeded)
        }))

      it.effect("20 concurrent POST .../credentials: two 201, eighteen 409 credential_limit_exceeded, 2 listed", () =>
        Effect.gen(function*() {
          const { services: [service] } = yield* givenServices(1)
          const answers = yield* concurrently(20, () => admin.post(`${service!.path}/credentials`))
          const created = expectLimitAnswers(answers, 201)
          expectListedAfter(yield* listedClientIds(service!.path), created.map((r) => r.body.client_id as string))
        }))

      it.effect("10 concurrent saves each adding 1 credential: two succeed, eight answer 409, 2 listed", () =>
        Effect.gen(function*() {
          const { profile, environment, services: [service] } = yield* givenServices(1)
          const answers = yield* concurrently(10, () =>
            admin.post(`/admin/profiles/${profile}/save`, {
              changes: [{ op: "add_credential", environment, service_uuid: service!.address.uuid }]
            }))
          const saved = expectLimitAnswers(answers, 200)
          const created = saved.map((r) => {
            expect(r.body.created).toHaveLength(1)
            expect(r.body.removed).toEqual([])
            return r.body.created[0].client_id as string
          })
          expectListedAfter(yield* listedClientIds(service!.path), created)
        }))

      it.effect("10 concurrent saves touching two services in either order neither deadlock nor exceed the limit", () =>
        Effect.gen(function*() {
          const { profile, environment, services } = yield* givenServices(2)
          const [first, second] = services.map((s) => ({ op: "add_credential", environment, service_uuid: s.address.uuid }))
          // A deadlock would be a 500 (PostgreSQL detects it within its deadlock_timeout of 1 s).
          const answers = yield* concurrently(
            10,
            (i) => admin.post(`/admin/profiles/${profile}/save`, { changes: i % 2 === 0 ? [first, second] : [second, first] })
          )
          const saved = expectLimitAnswers(answers, 200)
          // A save lists what it created in the order of its changes, which alternates: every
          // credential created is listed under one of the two services, and each lists two.
          const created = saved.flatMap((r) => (r.body.created as Array<{ client_id: string }>).map((c) => c.client_id))
          const listed: Array<string> = []
          for (const service of services) {
            const ids = yield* listedClientIds(service.path)
            expect(ids).toHaveLength(2)
            listed.push(...ids)
          }
          for (const clientId of created) expect(listed).toContain(clientId)
        }))
    }
  )
})
