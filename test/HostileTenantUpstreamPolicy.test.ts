/**
 * The upstream policy beyond one instance's storage: the deployment-wide list
 * (UPSTREAM_ALLOWED_ORIGINS, a setting) on memory; a second instance on one PostgreSQL database sees
 * a profile's changed list on its next call; export and import keep the lists and approvals.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { CatalogueLookup } from "../src/catalogue/CatalogueLookup.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import type { EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import * as Storage from "../src/storage/Storage.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { decodeDocument } from "../src/transfer/ExportFile.js"
import { importDatabase } from "../src/transfer/ImportDatabase.js"
import { makeTestServer, uniqueName } from "../src/testing.js"
import { describeWithPostgres, embeddedStorage, freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { callPathOf, expectStatus, givenOwnedProfile, proxy, root, startCorpUpstream } from "./support/HostileUpstreams.js"
import { callService } from "./support/Tokens.js"

const corp = await startCorpUpstream()
afterAll(corp.close)
const { origin: ORIGIN, port: PORT, reached } = corp

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
