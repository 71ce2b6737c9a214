/**
 * A profile owner tries to reach what is not theirs through a proxy service: the loopback upstream
 * of another profile in every numeric form, `localhost`, a name that resolves to loopback, cloud
 * metadata, another profile's allowed origin; with static `Authorization` headers; and tries to
 * allow origins itself. The upstream policy (docs/contract.md, upstream targets) refuses each at
 * write (400) or at call (502), and the upstream never hears from the owner, while an admin's
 * local upstream works end to end. Run on the in-memory store, the embedded database and
 * PostgreSQL; the deployment-wide list (a setting) on memory; export and import keep the lists and
 * approvals; a second instance on one PostgreSQL database sees a changed list on its next call.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import type { EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CatalogueLookup } from "../src/catalogue/CatalogueLookup.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import { lookup } from "node:dns/promises"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { hostname } from "node:os"
import * as Storage from "../src/storage/Storage.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { outsidePolicyWarning, upstreamsOutsidePolicy } from "../src/service-call/proxy/UpstreamPolicyReport.js"
import { decodeDocument } from "../src/transfer/ExportFile.js"
import { importDatabase } from "../src/transfer/ImportDatabase.js"
import { ADMIN_TOKEN, type JsonResponse, makeTestServer, serverPort, type TestStorage, uniqueName } from "../src/testing.js"
import {
  describeWithPostgres,
  embeddedStorage,
  freshDatabase,
  memoryStorage,
  postgresStorage,
  TEST_DATABASE_URL
} from "./support/Databases.js"
import { adminAs as as, expectErrorBody } from "./support/Http.js"
import { callService } from "./support/Tokens.js"

// ---------------------------------------------------------------------------------------------
// Profile corp's upstream, on this machine: what an owner of another profile wants to reach.

const heard: Array<{ readonly path: string; readonly authorization: string | undefined }> = []
const upstream = NodeHttp.createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    heard.push({ path: request.url ?? "", authorization: request.headers.authorization })
    response.writeHead(200, { "content-type": "application/json" })
    response.end(JSON.stringify({ secret: "corp's data" }))
  })
})
await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
const PORT = (upstream.address() as AddressInfo).port
const ORIGIN = `http://127.0.0.1:${PORT}`
afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())))

/** Whether the upstream heard a request at `path` (each test uses paths of its own). */
const reached = (path: string) => heard.some((request) => request.path === path)

/** Every way an owner might write this machine's loopback upstream (and its neighbours) in a URL. */
const loopbackForms = (path: string) => [
  `http://127.0.0.1:${PORT}${path}`,
  `http://127.1:${PORT}${path}`,
  `http://0177.0.0.1:${PORT}${path}`,
  `http://0x7f.1:${PORT}${path}`,
  `http://2130706433:${PORT}${path}`,
  `http://localhost:${PORT}${path}`,
  `http://LocalHost.:${PORT}${path}`,
  `http://corp.localhost:${PORT}${path}`,
  `http://[::1]:${PORT}${path}`,
  `http://[::ffff:127.0.0.1]:${PORT}${path}`,
  `http://[::ffff:7f00:1]:${PORT}${path}`,
  `http://[64:ff9b::7f00:1]:${PORT}${path}`,
  `http://0.0.0.0:${PORT}${path}`,
  `http://169.254.169.254/latest/meta-data${path}`,
  `http://[fd00:ec2::254]/latest/meta-data${path}`,
  `http://10.0.0.1${path}`,
  `http://192.168.1.1${path}`
]

const root = as(ADMIN_TOKEN)

const expectStatus = (response: JsonResponse, status: number) =>
  expect({ status: response.status, text: response.text }).toEqual({ status, text: expect.any(String) })

/** A profile with environment prod, made by the admin, and an owner token for it. */
const givenOwnedProfile = (prefix: string) =>
  Effect.gen(function*() {
    const profile = uniqueName(prefix)
    expectStatus(yield* root.put(`/admin/profiles/${profile}`), 201)
    expectStatus(yield* root.put(`/admin/profiles/${profile}/environments/prod`), 201)
    const token = yield* root.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: [profile] })
    expectStatus(token, 201)
    return { profile, owner: as(token.body.token as string), services: `/admin/profiles/${profile}/environments/prod/services` }
  })

/** The service-call path of a service document answered by the admin API. */
const callPathOf = (profile: string, service: JsonResponse) => `/service/${profile}/prod/json/${service.body.uuid}`

const proxy = (url: string, headers?: Record<string, string>) => ({
  auth_type: "none",
  handler: { type: "proxy", url, ...(headers === undefined ? {} : { headers }) }
})

const STOLEN = { Authorization: "Bearer stolen-from-corp" }
const NOT_ALLOWED = { error: "bad_gateway", error_description: "The upstream address is not allowed for this service" }

/** A chunked body goes through the HttpApi app rather than the fast lane: both must refuse alike. */
const callChunked = (path: string) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const request = NodeHttp.request(
          {
            host: "127.0.0.1",
            port,
            path,
            method: "POST",
            headers: { "content-type": "application/json", "transfer-encoding": "chunked" }
          },
          (response) => {
            const chunks: Array<Buffer> = []
            response.on("data", (chunk: Buffer) => chunks.push(chunk))
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }))
          }
        )
        request.on("error", reject)
        request.write("{}")
        request.end()
      })
    ))

/** This machine's name, when /etc/hosts makes it resolve to loopback (most do); undefined otherwise. */
const loopbackName = await lookup(hostname(), { all: true }).then(
  (
    addresses
  ) => (addresses.length > 0 && addresses.every((a) => a.address.startsWith("127.") || a.address === "::1") ? hostname() : undefined),
  () => undefined
)

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
        for (const url of loopbackForms("/owner-write")) {
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

describeWithPostgres("two instances on one PostgreSQL database", () => {
  it.scoped(
    "an admin removing a profile's origin is seen by the other instance's cached route on its next call",
    () =>
      Effect.gen(function*() {
        const url = Redacted.make(TEST_DATABASE_URL!)
        const first = Context.get(yield* Layer.build(Storage.layerPostgres(url)), CatalogueWrites)
        const second = Context.get(yield* Layer.build(Storage.layerPostgres(url)), CatalogueLookup)
        const address = {
          profile: uniqueName("shared") as ProfileId,
          environment: "prod" as EnvironmentName,
          uuid: randomUUID() as ServiceUuid
        }
        const actor = { name: "admin", source: "test" }
        yield* first.putProfile(address.profile, new Date(), actor, undefined, [ORIGIN])
        yield* first.putEnvironment(address.profile, address.environment, new Date(), actor)
        yield* first.putService(
          address,
          { name: "s", auth_type: "none", handler: { type: "proxy", url: `${ORIGIN}/x` } },
          "create",
          new Date(),
          actor
        )
        const route = (repo: typeof second) => Effect.map(repo.findServiceRoute(address, Option.none()), Option.getOrThrow)
        expect((yield* route(second)).upstreamOrigins).toEqual([ORIGIN])
        expect((yield* route(second)).upstreamOrigins).toEqual([ORIGIN]) // held by the second's cache now
        yield* first.putProfile(address.profile, new Date(), actor, undefined, null)
        expect((yield* route(second)).upstreamOrigins).toBeNull()
      }).pipe(Effect.orDie),
    60_000
  )
})

describe("UPSTREAM_ALLOWED_ORIGINS: origins every profile may target", () => {
  layer(makeTestServer({ config: { upstreamAllowedOrigins: [ORIGIN] } }))((it) => {
    it.effect("an owner may target an allowed origin, internal or not; any other origin is refused", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("tenant")
        const service = yield* owner.post(services, proxy(`http://0x7f000001:${PORT}/deployment`))
        expectStatus(service, 201)
        expect((yield* callService(callPathOf(profile, service))).status).toBe(200)
        expect(reached("/deployment")).toBe(true)
        expect((yield* owner.post(services, proxy("https://public.example/x"))).body.error_description).toMatch(
          /^handler\.url: https:\/\/public\.example is not among the origins this profile's services may target/
        )
        expect((yield* owner.post(services, proxy(`http://127.0.0.1:${PORT + 1}/x`))).status).toBe(400)
      }))
  })
})

describe("export and import keep the lists and the approvals", () => {
  layer(makeTestServer({ storage: embeddedStorage() }))((it) => {
    it.effect("a profile's upstream_origins and a service's approval travel in the file; an older file reads none", () =>
      Effect.gen(function*() {
        const { owner, profile, services } = yield* givenOwnedProfile("moved")
        expectStatus(yield* root.put(`/admin/profiles/${profile}`, { upstream_origins: ["https://api.example.com"] }), 200)
        const approved = yield* root.post(services, proxy(`${ORIGIN}/moved`))
        const owned = yield* owner.post(services, proxy("https://api.example.com/v1"))
        const document = yield* (exportDatabase() as Effect.Effect<unknown, unknown, SqlClient.SqlClient>).pipe(Effect.orDie)
        const tables =
          (document as { tables: { profiles: Array<Record<string, unknown>>; services: Array<Record<string, unknown>> } }).tables
        expect(tables.profiles.find((row) => row.profile === profile)?.upstream_origins).toEqual(["https://api.example.com"])
        const approvalOf = (uuid: unknown) => tables.services.find((row) => row.uuid === uuid)?.upstream_approved
        expect([approvalOf(approved.body.uuid), approvalOf(owned.body.uuid)]).toEqual([true, false])

        // A file written before the policy: no origins, nothing approved.
        const older = JSON.parse(JSON.stringify(document)) as typeof document & { tables: typeof tables }
        for (const row of older.tables.profiles) delete row.upstream_origins
        for (const row of older.tables.services) delete row.upstream_approved
        const decoded = decodeDocument(older)
        expect(Either.isRight(decoded)).toBe(true)
        if (Either.isRight(decoded)) {
          expect(decoded.right.tables.profiles.every((row) => row.upstream_origins === null)).toBe(true)
          expect(decoded.right.tables.services.every((row) => row.upstream_approved === false)).toBe(true)
        }

        if (TEST_DATABASE_URL === undefined) return
        const target = yield* Effect.promise(freshDatabase)
        const imported = yield* Effect.gen(function*() {
          const parsed = decodeDocument(document)
          if (Either.isLeft(parsed)) return yield* Effect.dieMessage("the export does not decode")
          yield* importDatabase(parsed.right, { merge: false })
          const sql = yield* SqlClient.SqlClient
          const profiles = yield* sql`SELECT upstream_origins FROM profiles WHERE profile = ${profile}`
          const rows = yield* sql`SELECT uuid, upstream_approved FROM services WHERE profile = ${profile} ORDER BY position`
          return { profiles, rows }
        }).pipe(
          Effect.provide(Storage.layerMigrated(Storage.layerPostgresClient(Redacted.make(target.url)))),
          Effect.orDie,
          Effect.ensuring(Effect.promise(target.drop))
        )
        expect(imported.profiles).toEqual([{ upstream_origins: ["https://api.example.com"] }])
        expect(imported.rows).toEqual([
          { uuid: approved.body.uuid, upstream_approved: true },
          { uuid: owned.body.uuid, upstream_approved: false }
        ])
      }) as Effect.Effect<void, never, never>)
  })
})

it("the upstream heard nobody but those allowed", () => {
  expect(heard.map((request) => request.path).filter((path) => /owner-write|rebound|tenant|elsewhere/.test(path))).toEqual([])
})
