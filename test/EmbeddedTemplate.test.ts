/**
 * A first start on an empty DATA_DIR copies the build's template database instead of running
 * initdb (src/datadir/EmbeddedTemplate.ts). The copy is a working database that migrates and keeps
 * what it is given, beside the files already in the directory; without a template nothing is copied
 * and the caller runs initdb.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as EmbeddedTemplate from "../src/datadir/EmbeddedTemplate.js"
import * as PgliteClient from "../src/storage/PgliteClient.js"
import * as Storage from "../src/storage/Storage.js"

const root = mkdtempSync(join(tmpdir(), "service-auth-template-"))
const template = join(root, "template")
afterAll(() => rmSync(root, { recursive: true, force: true }))

beforeAll(() => Effect.runPromise(EmbeddedTemplate.build(template)), 120_000)

describe("the embedded database template", () => {
  it("is a whole database, renamed into place only when complete", () => {
    expect(PgliteClient.isInitialized(template)).toBe(true)
    expect(existsSync(`${template}.partial`)).toBe(false)
  })

  it.effect(
    "copied into a directory that already holds files: they stay, a cut-short copy is redone, the copy migrates and stores",
    () =>
      Effect.gen(function*() {
        const dataDir = join(root, "data")
        mkdirSync(dataDir)
        writeFileSync(join(dataDir, "admin-token"), "kept\n")
        // What a copy cut short would leave: a file of the template's, and no PG_VERSION.
        writeFileSync(join(dataDir, "postgresql.conf"), "cut short")
        expect(yield* EmbeddedTemplate.copyInto(dataDir, template)).toBe(true)
        expect(readFileSync(join(dataDir, "admin-token"), "utf8")).toBe("kept\n")
        for (const file of ["PG_VERSION", "postgresql.conf"]) {
          expect(readFileSync(join(dataDir, file), "utf8")).toBe(readFileSync(join(template, file), "utf8"))
        }
        const stored = yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE copied (value text)`
          yield* sql`INSERT INTO copied VALUES ('there')`
          return yield* sql<{ value: string }>`SELECT value FROM copied`
        }).pipe(Effect.provide(Storage.layerMigrated(Storage.layerEmbeddedClient(dataDir)).pipe(Layer.orDie)))
        expect(stored).toEqual([{ value: "there" }])
        // The template itself is untouched by what the copy stored.
        const reopened = yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ value: string }>`SELECT value FROM copied`
        }).pipe(Effect.provide(Storage.layerEmbeddedClient(dataDir).pipe(Layer.orDie)))
        expect(reopened).toEqual([{ value: "there" }])
      }),
    120_000
  )

  it.effect("without a template for this PGlite nothing is copied, and the directory is left as it was", () =>
    Effect.gen(function*() {
      const dataDir = join(root, "untouched")
      mkdirSync(dataDir)
      expect(yield* EmbeddedTemplate.copyInto(dataDir, join(root, "no-such-template"))).toBe(false)
      expect(readdirSync(dataDir)).toEqual([])
    }))
})
