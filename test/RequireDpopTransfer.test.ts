/**
 * A service's `require_dpop` through `export` and `import`, in process on the embedded
 * database and PostgreSQL: the file carries it, an import restores it, and a file written before
 * the field existed imports its services as accepting Bearer tokens (false). PostgreSQL on a
 * database of its own: an export refuses rows other test files write straight into a repository.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, type Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CatalogueQueries } from "../src/catalogue/CatalogueQueries.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { type ExportDocument, parseExport } from "../src/transfer/ExportFile.js"
import { importDatabase } from "../src/transfer/ImportDatabase.js"
import { TEST_ACTOR, uniqueName } from "../src/testing.js"
import { describeWithPostgres, embeddedStorage, isolatedPostgresStorage } from "./support/Databases.js"

const NOW = new Date("2026-01-01T00:00:00.000Z")
const ECHO = { type: "echo" } as const

/** Only `profile`'s catalogue rows of a whole export (other tests share the database), keys left out. */
const onlyProfile = (document: ExportDocument, profile: string, dropField: boolean): unknown => ({
  ...document,
  tables: {
    profiles: document.tables.profiles.filter((row) => row.profile === profile),
    environments: document.tables.environments.filter((row) => row.profile === profile),
    services: document.tables.services.filter((row) => row.profile === profile).map((row) => {
      if (!dropField) return row
      const { require_dpop: _dropped, ...older } = row
      return older
    }),
    credentials: [],
    server_keys: [],
    signing_keys: [],
    audit_events: []
  }
})

const suite = (storage: Layer.Layer<CatalogueWrites | CatalogueQueries | SqlClient.SqlClient, unknown>) =>
  layer(storage, { excludeTestServices: true, timeout: 60_000 })((it) => {
    it.effect("the file carries require_dpop; an import restores it; an older file reads false", () =>
      Effect.gen(function*() {
        const repo = yield* CatalogueWrites
        const queries = yield* CatalogueQueries
        const profile = uniqueName("transfer") as ProfileId
        const environment = "production" as EnvironmentName
        const strict = { profile, environment, uuid: randomUUID() as ServiceUuid }
        const plain = { profile, environment, uuid: randomUUID() as ServiceUuid }
        yield* repo.putProfile(profile, NOW, TEST_ACTOR)
        yield* repo.putEnvironment(profile, environment, NOW, TEST_ACTOR)
        yield* repo.putService(strict, { name: "strict", auth_type: "oauth", handler: ECHO, require_dpop: true }, "create", NOW, TEST_ACTOR)
        yield* repo.putService(plain, { name: "plain", auth_type: "oauth", handler: ECHO }, "create", NOW, TEST_ACTOR)

        const exported = yield* exportDatabase()
        const rows = exported.tables.services.filter((row) => row.profile === profile)
        expect(rows.map((row) => [row.name, row.require_dpop])).toEqual([["strict", true], ["plain", false]])

        const flags = Effect.gen(function*() {
          const strictDoc = Option.getOrThrow(yield* queries.getService(strict))
          const plainDoc = Option.getOrThrow(yield* queries.getService(plain))
          return [strictDoc.require_dpop, "require_dpop" in plainDoc]
        })
        for (const [dropField, expected] of [[false, [true, false]], [true, [undefined, false]]] as const) {
          yield* repo.deleteProfile(profile, NOW, TEST_ACTOR)
          const file = parseExport(JSON.stringify(onlyProfile(exported, profile, dropField)))
          if (Either.isLeft(file)) return yield* Effect.die(file.left)
          expect(file.right.tables.services.map((row) => row.require_dpop)).toEqual(dropField ? [false, false] : [true, false])
          yield* importDatabase(file.right, { merge: true })
          expect(yield* flags).toEqual(expected)
        }
      }))
  })

describe("require_dpop through export and import (embedded)", () => suite(embeddedStorage()))
describeWithPostgres("require_dpop through export and import (PostgreSQL)", () => suite(isolatedPostgresStorage()))
