/**
 * Scoped admin tokens through the HTTP API: each role (admin, owner, viewer) on its own profile, on
 * another profile (answered exactly as a profile that does not exist), on the signing keys, the
 * admin tokens, the audit trail and the profile listing. Run on the in-memory store, the embedded
 * database and PostgreSQL.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { adminAs as as, expectErrorBody } from "./support/Http.js"
import { AdminTokenStore } from "../src/admin/AdminTokenStore.js"
import { ADMIN_TOKEN, type JsonResponse, makeTestServer, type TestStorage, uniqueName } from "../src/testing.js"

type Caller = ReturnType<typeof as>
const root = as(ADMIN_TOKEN)

const expectStatus = (response: JsonResponse, status: number) =>
  expect({ status: response.status, text: response.text }).toEqual({ status, text: expect.any(String) })

const forbidden = (description: string) => ({ error: "forbidden", error_description: description })
const VIEWER_READS_ONLY = forbidden("A viewer token may only read")

/** A profile with environment prod, one oauth service and one credential on it, made by the admin. */
const givenProfile = Effect.gen(function*() {
  const profile = uniqueName("scope")
  expectStatus(yield* root.put(`/admin/profiles/${profile}`), 201)
  expectStatus(yield* root.put(`/admin/profiles/${profile}/environments/prod`), 201)
  const service = yield* root.post(`/admin/profiles/${profile}/environments/prod/services`, { name: "billing", auth_type: "oauth" })
  expectStatus(service, 201)
  const servicePath = `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}`
  const credential = yield* root.post(`${servicePath}/credentials`)
  expectStatus(credential, 201)
  return { profile, uuid: service.body.uuid as string, servicePath, clientId: credential.body.client_id as string }
})
type Profile = Effect.Effect.Success<typeof givenProfile>

/** A stored token of `role`, made by the admin. */
const givenToken = (role: "admin" | "owner" | "viewer", profiles?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const name = uniqueName(role)
    const response = yield* root.post("/admin/tokens", { name, role, ...(profiles === undefined ? {} : { profiles }) })
    expectStatus(response, 201)
    return { name, caller: as(response.body.token), token: response.body.token as string }
  })

/** Every admin request about `target`, with what each answers for a profile that does not exist. */
const requestsOn = (target: Profile) => {
  const p = `/admin/profiles/${target.profile}`
  const s = target.servicePath
  return {
    reads: [
      { label: "GET profile", run: (c: Caller) => c.get(p) },
      { label: "GET service", run: (c: Caller) => c.get(s) },
      { label: "GET credentials", run: (c: Caller) => c.get(`${s}/credentials`) }
    ],
    changes: [
      { label: "PUT environment", run: (c: Caller) => c.put(`${p}/environments/staging`) },
      { label: "POST service", run: (c: Caller) => c.post(`${p}/environments/prod/services`, { auth_type: "none" }) },
      { label: "PUT service", run: (c: Caller) => c.put(s, { name: "billing", auth_type: "oauth" }) },
      { label: "POST credential", run: (c: Caller) => c.post(`${s}/credentials`) },
      { label: "DELETE credential", run: (c: Caller) => c.delete(`${s}/credentials/${target.clientId}`) },
      { label: "save", run: (c: Caller) => c.post(`${p}/save`, { changes: [] }) },
      { label: "DELETE service", run: (c: Caller) => c.delete(s) },
      { label: "DELETE environment", run: (c: Caller) => c.delete(`${p}/environments/prod`) }
    ],
    profileLifecycle: [
      { label: "PUT profile", run: (c: Caller) => c.put(p) },
      { label: "DELETE profile", run: (c: Caller) => c.delete(p) }
    ]
  }
}

/** The same request on a profile that never existed, asked by the admin. */
const missingTwin = (target: Profile): Profile => ({
  profile: uniqueName("missing"),
  uuid: target.uuid,
  servicePath: target.servicePath.replace(target.profile, "never-" + target.profile),
  clientId: target.clientId
})

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage }))((it) => {
    it.effect("each role on its own profile: admin and owner change, a viewer reads only (403 forbidden otherwise)", () =>
      Effect.gen(function*() {
        for (const role of ["admin", "owner", "viewer"] as const) {
          const own = yield* givenProfile
          const { caller } = yield* givenToken(role, role === "admin" ? undefined : [own.profile])
          const requests = requestsOn(own)
          for (const read of requests.reads) expect([read.label, (yield* read.run(caller)).status]).toEqual([read.label, 200])
          for (const change of requests.changes) {
            const response = yield* change.run(caller)
            if (role === "viewer") expectErrorBody(response, 403, VIEWER_READS_ONLY)
            else expect([change.label, response.status]).toSatisfy(([, status]) => status === 200 || status === 201 || status === 204)
          }
          const [put, del] = requests.profileLifecycle
          if (role === "admin") {
            expectStatus(yield* put!.run(caller), 200)
            expectStatus(yield* del!.run(caller), 204)
          } else {
            const word = role === "owner" ? "An owner token may not" : "A viewer token may only read"
            expectErrorBody(yield* put!.run(caller), 403, forbidden(role === "owner" ? `${word} create profiles` : word))
            expectErrorBody(yield* del!.run(caller), 403, forbidden(role === "owner" ? `${word} delete profiles` : word))
            // Setting the credential lifetime is refused naming that, not the creation of a profile.
            const policy = yield* caller.put(`/admin/profiles/${own.profile}`, { credential_max_lifetime_days: 30 })
            expectErrorBody(
              policy,
              403,
              forbidden(
                role === "owner" ? "Only an admin token may set a profile's credential lifetime (credential_max_lifetime_days)" : word
              )
            )
            expectStatus(yield* root.get(`/admin/profiles/${own.profile}`), 200)
          }
        }
      }))

    it.effect("owner and viewer on another profile: every request answers exactly as for a profile that does not exist", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const other = yield* givenProfile
        for (const role of ["owner", "viewer"] as const) {
          const { caller } = yield* givenToken(role, [own.profile])
          const asked = requestsOn(other)
          const twin = requestsOn(missingTwin(other))
          const all = [...asked.reads, ...asked.changes, ...asked.profileLifecycle]
          const twins = [...twin.reads, ...twin.changes, ...twin.profileLifecycle]
          for (const [index, entry] of all.entries()) {
            const response = yield* entry.run(caller)
            expect([entry.label, response.status]).toEqual([entry.label, 404])
            // The admin's answer on a profile that never existed (a PUT or save would create or succeed there).
            if (!["PUT profile"].includes(entry.label)) {
              const missing = yield* twins[index]!.run(root)
              expect([entry.label, response.text]).toEqual([entry.label, missing.text])
            } else {
              expectErrorBody(response, 404, { error: "not_found", error_description: "Profile not found" })
            }
          }
          // A proxy handler keeping header values is judged as for a missing profile (nothing stored is read).
          const keeping = { auth_type: "oauth", handler: { type: "proxy", url: "https://upstream.example/", headers: ["X-Api-Key"] } }
          const kept = yield* caller.put(other.servicePath, keeping)
          const keptMissing = yield* root.put(missingTwin(other).servicePath, keeping)
          expect({ status: kept.status, text: kept.text }).toEqual({ status: keptMissing.status, text: keptMissing.text })
          // Nothing was changed there.
          const document = yield* root.get(`/admin/profiles/${other.profile}`)
          expect(document.body.environments.map((e: any) => e.name)).toEqual(["prod"])
          expect((yield* root.get(`${other.servicePath}/credentials`)).body.credentials).toHaveLength(1)
        }
      }))

    it.effect("listing: an owner or viewer sees only its profiles, an admin all", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const other = yield* givenProfile
        for (const role of ["owner", "viewer"] as const) {
          const { caller } = yield* givenToken(role, [own.profile, "not-yet-made"])
          const listed = yield* caller.get("/admin/profiles")
          expectStatus(listed, 200)
          expect(listed.body.profiles.map((p: any) => p.profile)).toEqual([own.profile])
        }
        const all = (yield* root.get("/admin/profiles")).body.profiles.map((p: any) => p.profile)
        expect(all).toEqual(expect.arrayContaining([own.profile, other.profile]))
      }))

    it.effect("keys and tokens: admin only; owner and viewer → 403 forbidden", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const admin = yield* givenToken("admin")
        expectStatus(yield* admin.caller.get("/admin/keys"), 200)
        expectStatus(yield* admin.caller.get("/admin/tokens"), 200)
        for (const role of ["owner", "viewer"] as const) {
          const { caller } = yield* givenToken(role, [own.profile])
          const keys = forbidden("Only an admin token may manage the signing keys")
          const tokens = forbidden("Only an admin token may manage admin tokens")
          expectErrorBody(yield* caller.get("/admin/keys"), 403, keys)
          expectErrorBody(yield* caller.post("/admin/keys/rotate"), 403, keys)
          expectErrorBody(yield* caller.get("/admin/tokens"), 403, tokens)
          expectErrorBody(yield* caller.post("/admin/tokens", { name: uniqueName("x"), role: "admin" }), 403, tokens)
          expectErrorBody(yield* caller.delete(`/admin/tokens/${admin.name}`), 403, tokens)
        }
        expectStatus(yield* root.get("/admin/tokens"), 200)
      }))

    it.effect("audit: an owner's changes name it; owner and viewer read only their profiles' events", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const other = yield* givenProfile
        const owner = yield* givenToken("owner", [own.profile])
        const viewer = yield* givenToken("viewer", [own.profile])
        expectStatus(yield* owner.caller.put(`/admin/profiles/${own.profile}/environments/qa`), 201)
        const ownTrail = yield* root.get(`/admin/audit?profile=${own.profile}&limit=1`)
        expect(ownTrail.body.events[0]).toMatchObject({ action: "environment.created", actor: owner.name, environment: "qa" })
        for (const { caller } of [owner, viewer]) {
          const all = yield* caller.get("/admin/audit?limit=500")
          expectStatus(all, 200)
          expect(new Set(all.body.events.map((e: any) => e.profile))).toEqual(new Set([own.profile]))
          expect((yield* caller.get(`/admin/audit?profile=${own.profile}`)).body.events.length).toBeGreaterThan(0)
          const elsewhere = yield* caller.get(`/admin/audit?profile=${other.profile}`)
          const never = yield* root.get(`/admin/audit?profile=${uniqueName("never")}`)
          expect({ status: elsewhere.status, text: elsewhere.text }).toEqual({ status: never.status, text: never.text })
        }
      }))

    it.effect("session: name, role and profiles of the token presented", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const owner = yield* givenToken("owner", [own.profile])
        expect((yield* root.get("/admin/session")).body).toEqual({ name: "admin", role: "admin", profiles: null })
        // An admin token's profiles may be left out or sent as null, as the listing answers them.
        expect((yield* root.post("/admin/tokens", { name: uniqueName("n"), role: "admin", profiles: null })).body.profiles).toBeNull()
        expect((yield* owner.caller.get("/admin/session")).body).toEqual({ name: owner.name, role: "owner", profiles: [own.profile] })
        expectStatus(yield* as("not-a-token-at-all").get("/admin/session"), 401)
      }))

    it.effect("tokens: created once with 256 random bits, listed without the token, revoked at once, audited without it", () =>
      Effect.gen(function*() {
        const own = yield* givenProfile
        const name = uniqueName("ci")
        const created = yield* root.post("/admin/tokens", { name, role: "viewer", profiles: [own.profile, own.profile] })
        expectStatus(created, 201)
        expect(Object.keys(created.body).sort()).toEqual(["created_at", "name", "profiles", "role", "token"])
        expect(created.body).toMatchObject({ name, role: "viewer", profiles: [own.profile] })
        expect(created.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/)
        const token: string = created.body.token
        expectStatus(yield* as(token).get(`/admin/profiles/${own.profile}`), 200)

        const listed = yield* root.get("/admin/tokens")
        expect(listed.text).not.toContain(token)
        const entry = listed.body.tokens.find((t: any) => t.name === name)
        expect(Object.keys(entry).sort()).toEqual(["created_at", "last_used_at", "name", "profiles", "role"])
        expect(entry.last_used_at).not.toBeNull()

        // Names are unique across the environment's tokens and the stored ones.
        expectErrorBody(yield* root.post("/admin/tokens", { name, role: "admin" }), 409, {
          error: "conflict",
          error_description: `An admin token named ${name} exists`
        })
        expectStatus(yield* root.post("/admin/tokens", { name: "admin", role: "admin" }), 409)

        expectStatus(yield* root.delete(`/admin/tokens/${name}`), 204)
        expectErrorBody(yield* as(token).get(`/admin/profiles/${own.profile}`), 401, {
          error: "unauthorized",
          error_description: "The admin token is not valid"
        })
        expectStatus(yield* root.delete(`/admin/tokens/${name}`), 404)

        const trail = yield* root.get("/admin/audit?limit=500")
        expect(trail.text).not.toContain(token)
        const events = trail.body.events.filter((e: any) => e.details?.name === name)
        expect(events.map((e: any) => [e.action, e.actor, e.details])).toEqual([
          ["admin_token.revoked", "admin", { name, role: "viewer", profiles: [own.profile] }],
          ["admin_token.created", "admin", { name, role: "viewer", profiles: [own.profile] }]
        ])
      }))

    it.effect("last_used_at is written at most once a minute", () =>
      Effect.gen(function*() {
        const store = yield* AdminTokenStore
        const { caller, name } = yield* givenToken("admin")
        expectStatus(yield* caller.get("/admin/session"), 200)
        const lastUsed = Effect.map(store.list, (tokens) => tokens.find((t) => t.name === name)!.last_used_at)
        const first = (yield* lastUsed)!
        expect(first).not.toBeNull()
        yield* store.markUsed(name, new Date(first.getTime() + 59_000))
        expect(yield* lastUsed).toEqual(first)
        yield* store.markUsed(name, new Date(first.getTime() + 60_000))
        expect(yield* lastUsed).toEqual(new Date(first.getTime() + 60_000))
      }))

    it.effect("a token request that does not decode → 400 invalid_request", () =>
      Effect.gen(function*() {
        for (
          const body of [
            { name: uniqueName("o"), role: "owner" },
            { name: uniqueName("o"), role: "viewer", profiles: [] },
            { name: uniqueName("o"), role: "owner", profiles: null },
            { name: uniqueName("a"), role: "admin", profiles: ["x"] },
            { name: "no spaces allowed", role: "admin" },
            { name: uniqueName("r"), role: "root" },
            { name: uniqueName("p"), role: "owner", profiles: ["../etc"] },
            { name: uniqueName("e"), role: "admin", extra: true }
          ]
        ) {
          const response = yield* root.post("/admin/tokens", body)
          expect([body, response.status, response.body?.error]).toEqual([body, 400, "invalid_request"])
        }
      }))
  })

describe("scoped admin tokens: memory storage", () => {
  suite(memoryStorage)
})

describe("scoped admin tokens: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("scoped admin tokens: PostgreSQL", () => {
  suite(postgresStorage())
})
