/**
 * The trusted issuers' admin API: admin tokens only (an owner gets 403), registered, read, listed,
 * replaced and deleted, each audited; what is refused (an issuer URL that is not https:, plain http:
 * on loopback without allow_insecure_loopback, a bad inline key; a federated credential naming an
 * issuer that does not allow its profile; deleting an issuer in use); a profile's list of those it
 * may use, for any token reading the profile; on memory and embedded storage.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { admin, makeTestServer, uniqueName } from "../src/testing.js"
import { adminAs } from "./support/Http.js"
import { createService } from "./support/ClientKeys.js"
import { embeddedStorage } from "./support/Databases.js"
import { ISSUER } from "./support/Federation.js"

const CLUSTER = "https://container.googleapis.com/v1/projects/acme/locations/europe-west1/clusters/prod"
const SUB = "system:serviceaccount:payments:billing"

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("registers, reads, lists, replaces and deletes an issuer, each audited", () =>
      Effect.gen(function*() {
        const name = uniqueName("cluster")
        const created = yield* admin.post("/admin/trusted-issuers", { name, issuer: CLUSTER, profiles: ["b", "a", "a"] })
        expect(created.status).toBe(201)
        expect(created.body).toEqual({
          name,
          issuer: CLUSTER,
          audience: ISSUER,
          algorithms: ["RS256", "ES256", "EdDSA"],
          max_token_lifetime_seconds: 3600,
          profiles: ["a", "b"],
          allow_insecure_loopback: false,
          created_at: expect.any(String),
          updated_at: expect.any(String)
        })
        expect((yield* admin.post("/admin/trusted-issuers", { name, issuer: CLUSTER, profiles: [] })).status).toBe(409)
        expect((yield* admin.get(`/admin/trusted-issuers/${name}`)).body).toEqual(created.body)
        expect((yield* admin.get("/admin/trusted-issuers")).body.issuers).toContainEqual(created.body)
        const replaced = yield* admin.put(`/admin/trusted-issuers/${name}`, {
          issuer: CLUSTER,
          profiles: ["a"],
          audience: "service-auth",
          algorithms: ["ES256"],
          max_token_lifetime_seconds: 600
        })
        expect(replaced.status).toBe(200)
        expect(replaced.body).toMatchObject({ audience: "service-auth", algorithms: ["ES256"], max_token_lifetime_seconds: 600 })
        expect(replaced.body.created_at).toBe(created.body.created_at)
        expect((yield* admin.delete(`/admin/trusted-issuers/${name}`)).status).toBe(204)
        expect((yield* admin.get(`/admin/trusted-issuers/${name}`)).status).toBe(404)
        expect((yield* admin.delete(`/admin/trusted-issuers/${name}`)).status).toBe(404)
        const audit = yield* admin.get("/admin/audit?limit=10")
        const actions = audit.body.events.filter((event: any) => event.details?.name === name).map((event: any) => event.action)
        expect(actions).toEqual(["trusted_issuer.deleted", "trusted_issuer.changed", "trusted_issuer.created"])
      }))

    it.effect("refuses an issuer URL that is not https:, and plain http: on loopback unless allowed", () =>
      Effect.gen(function*() {
        const put = (body: Record<string, unknown>) => admin.put(`/admin/trusted-issuers/${uniqueName("x")}`, { profiles: [], ...body })
        const plain = yield* put({ issuer: "http://cluster.example" })
        expect(plain.status).toBe(400)
        expect(plain.body.error_description).toBe(
          "issuer must be an https: URL (http: only for a loopback host with allow_insecure_loopback)"
        )
        const loopback = yield* put({ issuer: "http://127.0.0.1:8080/cluster" })
        expect(loopback.body.error_description).toBe(
          "issuer may be http: only with allow_insecure_loopback (loopback hosts only)"
        )
        expect((yield* put({ issuer: "http://127.0.0.1:8080/cluster", allow_insecure_loopback: true })).status).toBe(201)
        expect((yield* put({ issuer: "http://cluster.example", allow_insecure_loopback: true })).status).toBe(400)
        const badKey = yield* put({ issuer: CLUSTER, jwks: { keys: [{ kty: "oct", k: "c2VjcmV0" }] } })
        expect(badKey.status).toBe(400)
        expect(badKey.body.error_description).toMatch(/^jwks\.keys\.0: /)
        expect((yield* put({ issuer: CLUSTER, algorithms: ["HS256"] })).status).toBe(400)
        expect((yield* put({ issuer: CLUSTER, algorithms: ["none"] })).status).toBe(400)
      }))

    it.effect("a federated credential needs an issuer that allows its profile; an issuer in use is not deleted", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const name = uniqueName("cluster")
        const path = `${service.servicePath}/federated-credentials`
        const missing = yield* admin.post(path, { issuer: name, subject: SUB })
        expect(missing.status).toBe(400)
        expect(missing.body.error_description).toBe(`issuer: no trusted issuer named ${name} allows profile ${service.profile}`)
        expect((yield* admin.put(`/admin/trusted-issuers/${name}`, { issuer: CLUSTER, profiles: ["elsewhere"] })).status).toBe(201)
        expect((yield* admin.post(path, { issuer: name, subject: SUB })).status).toBe(400)
        expect((yield* admin.put(`/admin/trusted-issuers/${name}`, { issuer: CLUSTER, profiles: [service.profile] })).status).toBe(200)
        const created = yield* admin.post(path, { issuer: name, subject: SUB, claims: { "kubernetes.io/namespace": "payments" } })
        expect(created.status).toBe(201)
        expect(created.body).toEqual({
          client_id: expect.stringMatching(/^svc_[0-9a-f]{32}$/),
          created_at: expect.any(String),
          federated: { issuer: name, subject: SUB, claims: { "kubernetes.io/namespace": "payments" } },
          token_endpoint_auth_method: "federated_jwt"
        })
        expect((yield* admin.post(path, { issuer: name, subject: SUB, claims: { sub: "x" } })).status).toBe(400)
        const inUse = yield* admin.delete(`/admin/trusted-issuers/${name}`)
        expect(inUse.status).toBe(409)
        expect(inUse.body.error_description).toBe(
          `The trusted issuer ${name} is used by live federated credentials: ${created.body.client_id}; delete them first`
        )
        expect((yield* admin.delete(`${service.servicePath}/credentials/${created.body.client_id}`)).status).toBe(204)
        expect((yield* admin.delete(`/admin/trusted-issuers/${name}`)).status).toBe(204)
      }))

    it.effect("an owner token may not manage trusted issuers (403), but adds federated credentials in its profiles", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const name = uniqueName("cluster")
        expect((yield* admin.put(`/admin/trusted-issuers/${name}`, { issuer: CLUSTER, profiles: [service.profile] })).status).toBe(201)
        const token = yield* admin.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: [service.profile] })
        const owner = adminAs(token.body.token)
        const forbidden = { error: "forbidden", error_description: "Only an admin token may manage trusted issuers" }
        for (
          const answer of [
            yield* owner.get("/admin/trusted-issuers"),
            yield* owner.get(`/admin/trusted-issuers/${name}`),
            yield* owner.put(`/admin/trusted-issuers/${name}`, { issuer: CLUSTER, profiles: [] }),
            yield* owner.delete(`/admin/trusted-issuers/${name}`)
          ]
        ) {
          expect({ status: answer.status, body: answer.body }).toEqual({ status: 403, body: forbidden })
        }
        const added = yield* owner.post(`${service.servicePath}/federated-credentials`, { issuer: name, subject: SUB })
        expect(added.status).toBe(201)
      }))

    it.effect("any token reading a profile lists the issuers it may use, without their keys or other profiles", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const other = yield* createService()
        const [allowing, elsewhere] = [uniqueName("cluster"), uniqueName("cluster")]
        const jwks = {
          keys: [{
            kty: "EC",
            crv: "P-256",
            x: "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            y: "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
          }]
        }
        const registered = yield* admin.put(`/admin/trusted-issuers/${allowing}`, {
          issuer: CLUSTER,
          jwks,
          profiles: [service.profile, other.profile],
          algorithms: ["ES256"],
          max_token_lifetime_seconds: 600
        })
        expect(registered.status).toBe(201)
        expect((yield* admin.put(`/admin/trusted-issuers/${elsewhere}`, { issuer: CLUSTER, profiles: [other.profile] })).status).toBe(201)
        const listing = {
          issuers: [{ name: allowing, issuer: CLUSTER, audience: ISSUER, algorithms: ["ES256"], max_token_lifetime_seconds: 600 }]
        }
        const path = `/admin/profiles/${service.profile}/trusted-issuers`
        expect((yield* admin.get(path)).body).toEqual(listing)
        for (const role of ["owner", "viewer"]) {
          const token = yield* admin.post("/admin/tokens", { name: uniqueName(role), role, profiles: [service.profile] })
          const scoped = adminAs(token.body.token)
          const listed = yield* scoped.get(path)
          expect({ status: listed.status, body: listed.body }).toEqual({ status: 200, body: listing })
          // Another profile answers as one that does not exist.
          const hidden = yield* scoped.get(`/admin/profiles/${other.profile}/trusted-issuers`)
          const missing = yield* scoped.get(`/admin/profiles/${uniqueName("nowhere")}/trusted-issuers`)
          expect(hidden.status).toBe(404)
          expect(hidden.body).toEqual(missing.body)
        }
        const introspector = yield* admin.post("/admin/tokens", {
          name: uniqueName("rs"),
          role: "introspector",
          profiles: [service.profile]
        })
        expect((yield* adminAs(introspector.body.token).get(path)).status).toBe(403)
        const missing = yield* admin.get(`/admin/profiles/${uniqueName("nowhere")}/trusted-issuers`)
        expect({ status: missing.status, body: missing.body }).toEqual({
          status: 404,
          body: { error: "not_found", error_description: "Profile not found" }
        })
        expect((yield* admin.get("/admin/profiles/-bad-/trusted-issuers")).status).toBe(400)
      }))
  })

describe("trusted issuers' admin API (memory)", () => suite())
describe("trusted issuers' admin API (embedded)", () => suite({ storage: embeddedStorage() }))
