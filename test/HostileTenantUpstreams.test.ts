/**
 * A profile owner tries to reach what is not theirs through a proxy service: the loopback upstream
 * of another profile in every numeric form, `localhost`, a name that resolves to loopback, cloud
 * metadata, another profile's allowed origin; with static `Authorization` headers; and tries to
 * allow origins itself. The upstream policy (docs/contract.md, upstream targets) refuses each at
 * write (400) or at call (502), and the upstream never hears from the owner, while an admin's
 * local upstream works end to end. Run on the in-memory store, the embedded database and
 * PostgreSQL. The deployment-wide list, a second instance and export and import:
 * HostileTenantUpstreamPolicy.test.ts.
 */
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import type { Layer } from "effect"
import { Effect } from "effect"
import { outsidePolicyWarning, upstreamsOutsidePolicy } from "../src/service-call/proxy/UpstreamPolicyReport.js"
import { makeTestServer, type TestStorage, uniqueName } from "../src/testing.js"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { adminAs as as, expectErrorBody } from "./support/Http.js"
import {
  callChunked,
  callPathOf,
  expectStatus,
  givenOwnedProfile,
  loopbackForms,
  loopbackName,
  NOT_ALLOWED,
  proxy,
  root,
  startCorpUpstream,
  STOLEN
} from "./support/HostileUpstreams.js"
import { callService } from "./support/Tokens.js"

const corp = await startCorpUpstream()
afterAll(corp.close)
const { heard, origin: ORIGIN, port: PORT, reached } = corp

const suite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage }))((it) => {
    it.effect("an admin's proxy to a local upstream answers end to end, and its document gains no member", () =>
      Effect.gen(function*() {
        const corp = yield* givenOwnedProfile("corp")
        const service = yield* root.post(corp.services, proxy(`${ORIGIN}/corp-admin`))
        expectStatus(service, 201)
        expect(Object.keys(service.body)).toEqual(["uuid", "name", "auth_type", "handler", "credentials"])
        const answer = yield* callService(callPathOf(corp.profile, service))
        expect({ status: answer.status, body: answer.body }).toEqual({ status: 200, body: { secret: "corp's data" } })
        expect((yield* callChunked(callPathOf(corp.profile, service))).status).toBe(200)
        const read = yield* root.get(`${corp.services}/${service.body.uuid}`)
        expect(read.body.upstream_refusal).toBeUndefined()
      }))

    it.effect("an owner's proxy to loopback, localhost, metadata or a private address, in any form: 400, nothing stored, nothing sent", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("tenant")
        const existing = yield* owner.post(services, { auth_type: "none" })
        expectStatus(existing, 201)
        for (const url of loopbackForms(PORT, "/owner-write")) {
          const created = yield* owner.post(services, proxy(url, STOLEN))
          expect([url, created.status]).toEqual([url, 400])
          expect(created.body.error).toBe("invalid_request")
          expect(created.body.error_description).toMatch(
            /^handler\.url: \S+ is an? [^,]+.*, which an owner's service may not target unless an admin allows its origin$/
          )
          const replaced = yield* owner.put(`${services}/${existing.body.uuid}`, proxy(url, STOLEN))
          expect([url, replaced.status]).toEqual([url, 400])
        }
        expect((yield* owner.post(services, proxy(`http://2130706433:${PORT}/x`))).body.error_description).toBe(
          "handler.url: 127.0.0.1 is a loopback address, which an owner's service may not target unless an admin allows its origin"
        )
        const document = yield* owner.get(`/admin/profiles/${profile}`)
        expect(document.body.environments[0].services.map((s: { handler: unknown }) => s.handler)).toEqual([{ type: "echo" }])
        expect(reached("/owner-write")).toBe(false)
      }))

    it.effect.skipIf(loopbackName === undefined)(
      "an owner's name that resolves to loopback: refused when the connection is made (502)",
      () =>
        Effect.gen(function*() {
          const { owner, profile, services } = yield* givenOwnedProfile("tenant")
          const service = yield* owner.post(services, proxy(`http://${loopbackName}:${PORT}/rebound`, STOLEN))
          // A name is judged where it resolves, at every connection: saving it is allowed.
          expectStatus(service, 201)
          expectErrorBody(yield* callService(callPathOf(profile, service)), 502, NOT_ALLOWED)
          expect(yield* callChunked(callPathOf(profile, service))).toEqual({ status: 502, body: NOT_ALLOWED })
          // Refusals are not the upstream's failures: the breaker stays closed, no 503 after many.
          for (let i = 0; i < 6; i++) expect((yield* callService(callPathOf(profile, service))).status).toBe(502)
          expect(reached("/rebound")).toBe(false)
        })
    )

    it.effect("another profile's allowed origin is that profile's: an owner elsewhere is refused", () =>
      Effect.gen(function*() {
        const corp = yield* givenOwnedProfile("corp")
        const tenant = yield* givenOwnedProfile("tenant")
        expectStatus(yield* root.put(`/admin/profiles/${corp.profile}`, { upstream_origins: [`${ORIGIN}/`] }), 200)
        // corp's owner may target it: the admin allowed it for corp.
        const corpService = yield* corp.owner.post(corp.services, proxy(`${ORIGIN}/corp-owner`, STOLEN))
        expectStatus(corpService, 201)
        expect((yield* callService(callPathOf(corp.profile, corpService))).status).toBe(200)
        expect(heard.find((request) => request.path === "/corp-owner")?.authorization).toBe(STOLEN.Authorization)
        // The tenant's owner may not, neither without a list of its own (loopback) nor with one.
        const refused = yield* tenant.owner.post(tenant.services, proxy(`${ORIGIN}/tenant`, STOLEN))
        expect(refused.status).toBe(400)
        expectStatus(yield* root.put(`/admin/profiles/${tenant.profile}`, { upstream_origins: ["https://api.tenant.example"] }), 200)
        expect((yield* tenant.owner.post(tenant.services, proxy(`${ORIGIN}/tenant`, STOLEN))).body).toEqual({
          error: "invalid_request",
          error_description: `handler.url: ${ORIGIN} is not among the origins this profile's services may target ` +
            "(an admin allows origins with UPSTREAM_ALLOWED_ORIGINS or the profile's upstream_origins)"
        })
        // With a list, a public origin not on it is refused as well.
        expect((yield* tenant.owner.post(tenant.services, proxy("https://elsewhere.example/x"))).status).toBe(400)
        expectStatus(yield* tenant.owner.post(tenant.services, proxy("https://api.tenant.example/v1")), 201)
        expect(reached("/tenant")).toBe(false)
      }))

    it.effect("an owner or a viewer cannot set upstream_origins (403 naming it); both read them", () =>
      Effect.gen(function*() {
        const { owner, profile } = yield* givenOwnedProfile("tenant")
        const viewerToken = yield* root.post("/admin/tokens", { name: uniqueName("viewer"), role: "viewer", profiles: [profile] })
        const viewer = as(viewerToken.body.token as string)
        expectErrorBody(yield* owner.put(`/admin/profiles/${profile}`, { upstream_origins: [ORIGIN] }), 403, {
          error: "forbidden",
          error_description: "Only an admin token may set the origins a profile's services may target (upstream_origins)"
        })
        expectErrorBody(yield* owner.put(`/admin/profiles/${profile}`, { upstream_origins: null }), 403, {
          error: "forbidden",
          error_description: "Only an admin token may set the origins a profile's services may target (upstream_origins)"
        })
        expectErrorBody(yield* viewer.put(`/admin/profiles/${profile}`, { upstream_origins: [ORIGIN] }), 403, {
          error: "forbidden",
          error_description: "A viewer token may only read"
        })
        // Another profile answers as one that does not exist.
        expect((yield* owner.put(`/admin/profiles/${uniqueName("other")}`, { upstream_origins: [ORIGIN] })).status).toBe(404)
        expect((yield* owner.get(`/admin/profiles/${profile}`)).body.upstream_origins).toBeUndefined()
        // A malformed origin is a 400 naming it; the admin's list is stored normalised, each once.
        const malformed = yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: [`${ORIGIN}/path`] })
        expect(malformed.status).toBe(400)
        expect(malformed.body.error_description).toMatch(/^upstream_origins\.0: must be an origin/)
        const set = yield* root.put(`/admin/profiles/${profile}`, {
          upstream_origins: ["https://API.example.com:443/", "https://api.example.com"]
        })
        expect(set.body.upstream_origins).toEqual(["https://api.example.com"])
        expect((yield* owner.get(`/admin/profiles/${profile}`)).body.upstream_origins).toEqual(["https://api.example.com"])
        expect((yield* viewer.get(`/admin/profiles/${profile}`)).body.upstream_origins).toEqual(["https://api.example.com"])
        expect((yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: [] })).body.upstream_origins).toBeUndefined()
        const audit = yield* root.get(`/admin/audit?profile=${profile}`)
        expect(audit.body.events.slice(0, 2).map((e: { details: unknown }) => e.details)).toEqual([
          { upstream_origins: [] },
          { upstream_origins: ["https://api.example.com"] }
        ])
      }))

    it.effect("an admin's approval holds while the URL stays; an owner's new URL is judged as an owner's", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("tenant")
        const service = yield* root.post(services, proxy(`${ORIGIN}/approved`))
        const path = `${services}/${service.body.uuid}`
        // The owner renames it and adds a header: same URL, still approved, still answering.
        expectStatus(yield* owner.put(path, { name: "renamed", ...proxy(`${ORIGIN}/approved`, { "X-Api-Key": "k" }) }), 200)
        expect((yield* callService(callPathOf(profile, service))).status).toBe(200)
        // Another path on the same loopback upstream is a new URL: refused, the approved one kept.
        expect((yield* owner.put(path, proxy(`${ORIGIN}/approved-elsewhere`))).status).toBe(400)
        expect((yield* callService(callPathOf(profile, service))).status).toBe(200)
        expect(reached("/approved-elsewhere")).toBe(false)
        // An owner's echo, then the same URL again: the approval went with the proxy.
        expectStatus(yield* owner.put(path, { auth_type: "none" }), 200)
        expect((yield* owner.put(path, proxy(`${ORIGIN}/approved`))).status).toBe(400)
      }))

    it.effect("an owner's proxy whose origin an admin later removes: reported by GET, answered 502, until re-approved", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("tenant")
        expectStatus(yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: [ORIGIN] }), 200)
        const service = yield* owner.post(services, proxy(`${ORIGIN}/later-removed`))
        expectStatus(service, 201)
        expect((yield* callService(callPathOf(profile, service))).status).toBe(200)
        expectStatus(yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: null }), 200)
        const reason = "127.0.0.1 is a loopback address, which an owner's service may not target unless an admin allows its origin"
        const read = yield* owner.get(`${services}/${service.body.uuid}`)
        expect(read.body.upstream_refusal).toBe(reason)
        expect(Object.keys(read.body)).toEqual(["uuid", "name", "auth_type", "handler", "upstream_refusal", "credentials"])
        const document = yield* owner.get(`/admin/profiles/${profile}`)
        expect(document.body.environments[0].services[0].upstream_refusal).toBe(reason)
        const before = heard.length
        expectErrorBody(yield* callService(callPathOf(profile, service)), 502, NOT_ALLOWED)
        expect(yield* callChunked(callPathOf(profile, service))).toEqual({ status: 502, body: NOT_ALLOWED })
        expect(heard.length).toBe(before)
        // An admin saves it again: approved, answering, no longer reported.
        expectStatus(yield* root.put(`${services}/${service.body.uuid}`, proxy(`${ORIGIN}/later-removed`)), 200)
        expect((yield* callService(callPathOf(profile, service))).status).toBe(200)
        expect((yield* owner.get(`${services}/${service.body.uuid}`)).body.upstream_refusal).toBeUndefined()
      }))

    it.effect("the start-up report names each profile's services outside the policy and how to fix them", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("reported")
        expectStatus(yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: [ORIGIN] }), 200)
        const outside = yield* owner.post(services, proxy(`${ORIGIN}/reported`))
        yield* owner.post(services, proxy("https://api.example.com/fine"))
        expectStatus(yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: ["https://api.example.com"] }), 200)
        const report = yield* upstreamsOutsidePolicy
        expect(report.get(profile)).toEqual([
          `prod/${outside.body.uuid} (${ORIGIN} is not among the origins this profile's services may target ` +
          "(an admin allows origins with UPSTREAM_ALLOWED_ORIGINS or the profile's upstream_origins))"
        ])
        expect(outsidePolicyWarning(profile, report.get(profile)!)).toMatch(
          new RegExp(
            `^Profile ${profile}: 1 proxy service with an upstream outside the upstream policy, answering 502 bad_gateway until an admin token saves the service again`
          )
        )
      }))
  })

describe("hostile tenants and upstreams: memory storage", () => {
  suite(memoryStorage)
})

describe("hostile tenants and upstreams: embedded database", () => {
  suite(embeddedStorage())
})

describeWithPostgres("hostile tenants and upstreams: PostgreSQL", () => {
  suite(postgresStorage())
})

it("the upstream heard nobody but those allowed", () => {
  expect(heard.map((request) => request.path).filter((path) => /owner-write|rebound|tenant|elsewhere/.test(path))).toEqual([])
})
