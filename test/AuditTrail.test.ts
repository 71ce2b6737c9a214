/**
 * The audit trail over HTTP (docs/contract.md §3): every admin change writes one event in the
 * transaction of the change, with the admin token's name as its actor; `GET /admin/audit` answers
 * them newest first, by profile, in pages; a change that fails writes nothing; no secret ever
 * appears. Run on the in-memory store and on PostgreSQL.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { describeWithPostgres, isolatedPostgresStorage, memoryStorage } from "./support/Databases.js"
import { adminAs as as, expectErrorBody, oauthError, request } from "./support/Http.js"
import { ADMIN_TOKEN, type JsonResponse, makeTestServer, type TestStorage, uniqueName } from "../src/testing.js"

const ALICE = `alice-${randomBytes(18).toString("base64url")}`
const BOB = `bob-${randomBytes(18).toString("base64url")}`
const adminTokens = [
  { name: "admin", token: Redacted.make(ADMIN_TOKEN) },
  { name: "alice", token: Redacted.make(ALICE) },
  { name: "bob", token: Redacted.make(BOB) }
]

const alice = as(ALICE)
const bob = as(BOB)
const root = as(ADMIN_TOKEN)

const expectStatus = (response: JsonResponse, status: number) =>
  expect({ status: response.status, text: response.text }).toEqual({ status, text: expect.any(String) })

const profilePath = (profile: string) => `/admin/profiles/${profile}`
const environmentPath = (profile: string, environment: string) => `${profilePath(profile)}/environments/${environment}`
const servicePath = (profile: string, environment: string, uuid: string) => `${environmentPath(profile, environment)}/services/${uuid}`

/** One page of the trail, answered 200. */
const page = (query: string) =>
  Effect.map(root.get(`/admin/audit${query}`), (response) => {
    expectStatus(response, 200)
    expect(Object.keys(response.body).sort()).toEqual(["events", "next"])
    return response.body as { readonly events: ReadonlyArray<any>; readonly next: string | null }
  })

/** A profile's whole trail, newest first, read in pages of `limit`. */
const trailOf = (profile: string, limit = 500) =>
  Effect.gen(function*() {
    const events: Array<any> = []
    let after: string | null = null
    do {
      const next: { readonly events: ReadonlyArray<any>; readonly next: string | null } = yield* page(
        `?profile=${profile}&limit=${limit}${after === null ? "" : `&after=${after}`}`
      )
      events.push(...next.events)
      after = next.next
    } while (after !== null)
    return events
  })

/** What identifies an event, for comparing trails. */
const brief = (event: any) => [event.action, event.actor, event.environment, event.service_uuid, event.client_id] as const

/** A fresh profile, environment "prod" and one oauth service, made by alice. */
const givenService = Effect.gen(function*() {
  const profile = uniqueName("audit")
  expectStatus(yield* alice.put(profilePath(profile)), 201)
  expectStatus(yield* alice.put(environmentPath(profile, "prod")), 201)
  const created = yield* alice.post(`${environmentPath(profile, "prod")}/services`, { name: "billing", auth_type: "oauth" })
  expectStatus(created, 201)
  return { profile, uuid: created.body.uuid as string, path: servicePath(profile, "prod", created.body.uuid) }
})

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, config: { adminTokens } }))((it) => {
    it.effect("each action writes one event: time, actor (the token's name), source, action and what it touched", () =>
      Effect.gen(function*() {
        const profile = uniqueName("audit")
        const secrets: Array<string> = []
        expectStatus(yield* alice.put(profilePath(profile)), 201)
        expectStatus(yield* alice.put(profilePath(profile)), 200) // existed: not a change
        expectStatus(yield* root.put(environmentPath(profile, "prod")), 201)
        expectStatus(yield* root.put(environmentPath(profile, "prod")), 200)
        const service = yield* alice.post(`${environmentPath(profile, "prod")}/services`, { name: "billing", auth_type: "none" })
        const uuid: string = service.body.uuid
        const path = servicePath(profile, "prod", uuid)
        expectStatus(
          yield* alice.put(path, {
            name: "billing",
            auth_type: "oauth",
            handler: { type: "proxy", url: "https://user:pw@upstream.test/x" }
          }),
          200
        )
        expectStatus(
          yield* alice.put(path, {
            name: "billing",
            auth_type: "oauth",
            handler: { type: "proxy", url: "https://user:pw@upstream.test/x" }
          }),
          200
        ) // unchanged
        const first = yield* bob.post(`${path}/credentials`)
        expectStatus(first, 201)
        secrets.push(first.body.client_secret)
        expectStatus(yield* bob.delete(`${path}/credentials/${first.body.client_id}`), 204)
        const kept = yield* bob.post(`${path}/credentials`)
        secrets.push(kept.body.client_secret)
        const saved = yield* alice.post(`${profilePath(profile)}/save`, {
          changes: [
            { op: "add_credential", environment: "prod", service_uuid: uuid.toUpperCase() },
            { op: "remove_credential", environment: "prod", service_uuid: uuid, client_id: kept.body.client_id }
          ]
        })
        expectStatus(saved, 200)
        const added = saved.body.created[0]
        secrets.push(added.client_secret)
        expectStatus(yield* alice.delete(path), 204)
        // An environment and a profile deleted with credentials in them.
        expectStatus(yield* alice.put(environmentPath(profile, "staging")), 201)
        const other = yield* alice.post(`${environmentPath(profile, "staging")}/services`, { auth_type: "oauth" })
        const otherPath = servicePath(profile, "staging", other.body.uuid)
        const inStaging = yield* alice.post(`${otherPath}/credentials`)
        secrets.push(inStaging.body.client_secret)
        expectStatus(yield* bob.delete(environmentPath(profile, "staging")), 204)
        const last = yield* alice.post(`${environmentPath(profile, "prod")}/services`, { name: "last", auth_type: "oauth" })
        const lastCredential = yield* alice.post(`${servicePath(profile, "prod", last.body.uuid)}/credentials`)
        secrets.push(lastCredential.body.client_secret)
        expectStatus(yield* root.delete(profilePath(profile)), 204)

        const trail = yield* trailOf(profile)
        expect(trail.map(brief)).toEqual([
          ["profile.deleted", "admin", null, null, null],
          ["credential.removed", "admin", "prod", last.body.uuid, lastCredential.body.client_id],
          ["credential.added", "alice", "prod", last.body.uuid, lastCredential.body.client_id],
          ["service.created", "alice", "prod", last.body.uuid, null],
          ["environment.deleted", "bob", "staging", null, null],
          ["credential.removed", "bob", "staging", other.body.uuid, inStaging.body.client_id],
          ["credential.added", "alice", "staging", other.body.uuid, inStaging.body.client_id],
          ["service.created", "alice", "staging", other.body.uuid, null],
          ["environment.created", "alice", "staging", null, null],
          ["service.deleted", "alice", "prod", uuid, null],
          ["credential.removed", "alice", "prod", uuid, added.client_id],
          ["profile.saved", "alice", null, null, null],
          ["credential.removed", "alice", "prod", uuid, kept.body.client_id],
          ["credential.added", "alice", "prod", uuid, added.client_id],
          ["credential.added", "bob", "prod", uuid, kept.body.client_id],
          ["credential.removed", "bob", "prod", uuid, first.body.client_id],
          ["credential.added", "bob", "prod", uuid, first.body.client_id],
          ["service.changed", "alice", "prod", uuid, null],
          ["service.created", "alice", "prod", uuid, null],
          ["environment.created", "admin", "prod", null, null],
          ["profile.created", "alice", null, null, null]
        ])
        for (const event of trail) {
          expect(Object.keys(event).sort()).toEqual(
            ["action", "actor", "client_id", "details", "environment", "profile", "service_uuid", "source", "time"]
          )
          expect(event.profile).toBe(profile)
          expect(event.source).toMatch(/^(::ffff:)?127\.0\.0\.1$/)
          expect(event.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        }
        const details = Object.fromEntries(
          trail.map((event) => [`${event.action} ${event.client_id ?? event.environment ?? ""}`, event.details])
        )
        expect(details[`service.changed prod`]).toEqual({ name: "billing", auth_type: "oauth", handler: "proxy" })
        expect(trail.at(-3).details).toEqual({ name: "billing", auth_type: "none", handler: "echo" })
        expect(details["profile.saved "]).toEqual({ added: 1, removed: 1 })
        expect(details[`credential.removed ${inStaging.body.client_id}`]).toEqual({ cause: "environment.deleted" })
        expect(details[`credential.removed ${added.client_id}`]).toEqual({ cause: "service.deleted" })
        expect(details[`credential.removed ${lastCredential.body.client_id}`]).toEqual({ cause: "profile.deleted" })
        expect(details[`credential.removed ${first.body.client_id}`]).toBeNull()
        expect(details["profile.created "]).toBeNull()

        // Never a secret: no client secret, no admin token, not the proxy URL's password.
        const answer = (yield* root.get(`/admin/audit?profile=${profile}&limit=500`)).text
        for (const secret of [...secrets, ALICE, BOB, ADMIN_TOKEN, "user:pw", "upstream.test"]) expect(answer).not.toContain(secret)
      }))

    it.effect("pages: newest first, `limit` at most, `next` until the end, `after` continues; a profile's alone", () =>
      Effect.gen(function*() {
        const { path, profile } = yield* givenService
        const other = yield* givenService
        for (let i = 0; i < 3; i++) {
          const credential = yield* alice.post(`${path}/credentials`)
          expectStatus(yield* bob.delete(`${path}/credentials/${credential.body.client_id}`), 204)
          expectStatus(yield* alice.post(`${other.path}/credentials`), i < 2 ? 201 : 409)
        }
        const whole = yield* trailOf(profile)
        expect(whole).toHaveLength(9) // profile, environment, service, 3 × (added, removed)
        expect(whole.map((event) => event.action).at(-1)).toBe("profile.created")
        expect(whole.every((event) => event.profile === profile)).toBe(true)

        const first = yield* page(`?profile=${profile}&limit=4`)
        expect(first.events).toEqual(whole.slice(0, 4))
        expect(first.next).toEqual(expect.any(String))
        const second = yield* page(`?profile=${profile}&limit=4&after=${first.next}`)
        expect(second.events).toEqual(whole.slice(4, 8))
        const third = yield* page(`?profile=${profile}&limit=4&after=${second.next}`)
        expect(third).toEqual({ events: whole.slice(8), next: null })
        expect(yield* trailOf(profile, 1)).toEqual(whole)
        // Exactly a page's worth: no next page.
        expect((yield* page(`?profile=${profile}&limit=9`)).next).toBeNull()
        // Without `limit`, 50 at most.
        expect((yield* page(`?profile=${profile}`)).events).toEqual(whole)

        // Without `profile`: every profile's events, newest first, the latest on top.
        const all = yield* page("?limit=6")
        expect(all.events).toHaveLength(6)
        expect(all.events[0]).toMatchObject({ action: "credential.removed", profile })
        expect(all.events.map((event) => event.profile)).toContain(other.profile)
        const times = all.events.map((event) => Date.parse(event.time))
        expect(times).toEqual([...times].sort((a, b) => b - a))
      }))

    it.effect("limit outside 1-500, a cursor not from `next`, or a bad profile → 400 invalid_request", () =>
      Effect.gen(function*() {
        for (const limit of ["0", "501", "-1", "1.5", "abc", "", "01", "1e2"]) {
          expectErrorBody(
            yield* root.get(`/admin/audit?limit=${limit}`),
            400,
            oauthError("invalid_request", "limit: limit must be an integer from 1 to 500")
          )
        }
        const { profile } = yield* givenService
        const cursor = (yield* page(`?profile=${profile}&limit=1`)).next!
        for (const after of ["x", "1", Buffer.from("audit:0").toString("base64url"), `${cursor}A`, cursor.slice(1), ""]) {
          expectErrorBody(
            yield* root.get(`/admin/audit?after=${encodeURIComponent(after)}`),
            400,
            oauthError("invalid_request", "after: after must be the next cursor of an earlier answer")
          )
        }
        expectErrorBody(yield* root.get("/admin/audit?profile=.hidden"), 400, oauthError("invalid_request"))
        // A profile with no events (never existed, or long gone) is an empty trail, not 404.
        expect(yield* page(`?profile=${uniqueName("none")}`)).toEqual({ events: [], next: null })
      }))

    it.effect("a change that fails writes no event: a save over the limit, a save failing midway, deleting what is not there", () =>
      Effect.gen(function*() {
        const { path, profile, uuid } = yield* givenService
        const credential = yield* alice.post(`${path}/credentials`)
        const before = yield* trailOf(profile)
        const add = { op: "add_credential", environment: "prod", service_uuid: uuid }
        // Over the credential limit: the first two additions would fit, the third does not.
        expectErrorBody(
          yield* alice.post(`${profilePath(profile)}/save`, { changes: [add, add] }),
          409,
          oauthError("credential_limit_exceeded")
        )
        // An addition, then a removal of a credential that is not live: nothing is applied.
        expectErrorBody(
          yield* alice.post(`${profilePath(profile)}/save`, {
            changes: [add, { op: "remove_credential", environment: "prod", service_uuid: uuid, client_id: `svc_${"0".repeat(32)}` }]
          }),
          404,
          oauthError("not_found")
        )
        // A change naming a service that does not exist, or a malformed one after a good one.
        expectErrorBody(
          yield* alice.post(`${profilePath(profile)}/save`, { changes: [add, { ...add, service_uuid: randomUUID() }] }),
          404,
          oauthError("not_found")
        )
        expectErrorBody(
          yield* alice.post(`${profilePath(profile)}/save`, { changes: [add, { ...add, environment: "../x" }] }),
          400,
          oauthError("invalid_request")
        )
        expectErrorBody(yield* alice.post(`${path}/credentials`, { extra: 1 }), 400, oauthError("invalid_request"))
        expectErrorBody(yield* bob.delete(`${path}/credentials/svc_${"1".repeat(32)}`), 404, oauthError("not_found"))
        expectErrorBody(yield* bob.delete(servicePath(profile, "prod", randomUUID())), 404, oauthError("not_found"))
        expectErrorBody(yield* bob.delete(environmentPath(profile, "staging")), 404, oauthError("not_found"))
        expectErrorBody(yield* bob.put(environmentPath(uniqueName("none"), "prod")), 404, oauthError("not_found"))
        expectErrorBody(yield* bob.delete(profilePath(uniqueName("none"))), 404, oauthError("not_found"))
        expect(yield* trailOf(profile)).toEqual(before)
        // And the credential that was live still is.
        const live = yield* alice.get(`${path}/credentials`)
        expect(live.body.credentials.map((c: any) => c.client_id)).toEqual([credential.body.client_id])
      }))

    it.effect("GET /admin/audit needs an admin token: none or a wrong one → 401 unauthorized", () =>
      Effect.gen(function*() {
        expectErrorBody(yield* request("GET", "/admin/audit"), 401, oauthError("unauthorized"))
        expectErrorBody(
          yield* request("GET", "/admin/audit", { headers: { authorization: `Bearer ${ALICE}x` } }),
          401,
          oauthError("unauthorized", "The admin token is not valid")
        )
        expectStatus(yield* alice.get("/admin/audit?limit=1"), 200)
      }))
  })

describe("audit trail: in memory", () => {
  suite(memoryStorage)
})

// On a database of its own: the trail without `profile` is every profile's, and other test files
// write theirs at the same time, some at TestClock's time 0, which would break "newest first".
describeWithPostgres("audit trail: PostgreSQL", () => {
  suite(isolatedPostgresStorage())
})
