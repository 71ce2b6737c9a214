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
 * Embedded PGlite in memory. Each build costs ~3 s and ~700 MB: build at most one per test file
 * and share it across the file's tests (one `layer(...)`).
 */
export const embeddedStorage = () => Storage.layerEmbedded(undefined)

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
