/**
 * The storage layers tests run against. PostgreSQL tests need `TEST_DATABASE_URL` (CI always sets
 * it, e.g. `postgres://postgres@127.0.0.1:5432/test`); without it they are skipped with a warning.
 *
 * Several test files may share one PostgreSQL database at the same time, so every test uses fresh
 * names (`uniqueName`) and never assumes the database is empty.
 */
import { describe } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Storage from "../../src/storage/Storage.js"

export const TEST_DATABASE_URL: string | undefined = process.env.TEST_DATABASE_URL === ""
  ? undefined
  : process.env.TEST_DATABASE_URL

/** `describe` when `TEST_DATABASE_URL` is set, otherwise `describe.skip` with a warning. */
export const describeWithPostgres: typeof describe.skip = TEST_DATABASE_URL === undefined
  ? (() => {
    console.warn("PostgreSQL tests were skipped because TEST_DATABASE_URL is unset")
    return describe.skip
  })()
  : describe

/** The in-process store (no SQL). */
export const memoryStorage = Storage.layerMemory

/**
 * A temporary data directory, removed with the scope. Opened empty, the embedded storage copies the
 * build's template database into it, as a first `npm start` does: milliseconds, where a database in
 * memory runs initdb in WebAssembly (several times the CPU of the copy and open, ~700 MB while
 * it runs). The in-memory database itself is covered where it is the point (`SeenJtis.test.ts`).
 */
const temporaryDataDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "service-auth-embedded-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/**
 * The embedded storage (PGlite) in a temporary data directory. Each build still costs a second or
 * more of CPU: build at most one per test file and share it across the file's tests (one `layer(...)`).
 */
export const embeddedStorage = () => Layer.unwrapScoped(Effect.map(temporaryDataDir, Storage.layerEmbedded))

/** Only the embedded database's migrated client, in a temporary data directory (for export and import). */
export const embeddedClient = () =>
  Layer.unwrapScoped(Effect.map(temporaryDataDir, (dir) => Storage.layerMigrated(Storage.layerEmbeddedClient(dir))))

/**
 * PostgreSQL at `TEST_DATABASE_URL`, migrated. Only build it inside `describeWithPostgres`: without
 * the URL the layer fails when built.
 */
export const postgresStorage = () =>
  TEST_DATABASE_URL === undefined
    ? Layer.die(new Error("TEST_DATABASE_URL is unset"))
    : Storage.layerPostgres(Redacted.make(TEST_DATABASE_URL))

/**
 * A new, empty database on the PostgreSQL server of `TEST_DATABASE_URL`, for tests that need one
 * to themselves (several processes sharing its keys, the stored form of secrets); `drop` removes it.
 */
export const freshDatabase = async (): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const { default: pg } = await import("pg")
  const name = `service_auth_test_${randomBytes(6).toString("hex")}`
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL })
    await client.connect()
    try {
      await client.query(statement)
    } finally {
      await client.end()
    }
  }
  await run(`CREATE DATABASE ${name}`)
  const url = new URL(TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}

/**
 * PostgreSQL storage on a database of its own, created with the layer and dropped after it: for
 * tests that read the server's sessions and locks (`pg_blocking_pids`), which the catalogue writes
 * of other test files, running at the same time on `TEST_DATABASE_URL`, would join.
 */
export const isolatedPostgresStorage = () =>
  Layer.unwrapScoped(
    Effect.acquireRelease(Effect.promise(freshDatabase), (database) => Effect.promise(database.drop)).pipe(
      Effect.map((database) => Storage.layerPostgres(Redacted.make(database.url)))
    )
  )
