/**
 * An `SqlClient` over embedded PGlite (PostgreSQL compiled to WebAssembly), so `npm start` runs
 * with no database server and the same SQL, migrations and repository code serve both.
 *
 * PGlite is one PostgreSQL session. A semaphore of one permit gives each statement, and each
 * transaction as a whole, exclusive use of it: a transaction's BEGIN..COMMIT never interleaves with
 * another fiber's statements. Statements are compiled by the PostgreSQL compiler of `@effect/sql-pg`.
 */
import { Reactivity } from "@effect/experimental"
import { SqlClient, SqlError } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { PgClient } from "@effect/sql-pg"
import type { PGlite } from "@electric-sql/pglite"
import { Context, Effect, Layer, Option, Stream } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { execFile } from "node:child_process"
import { pathToFileURL } from "node:url"
import { type PgliteWarming, pgliteDist, warmedOptions } from "./PgliteWarmup.js"
import { PrivateNodeFs } from "../datadir/PrivateNodeFs.js"

/**
 * What the entry warmed of PGlite (`PgliteWarmup`), handed to the server it starts: the first
 * embedded database the server opens takes it (the memory is PGlite's from then on); any later one,
 * and a server given nothing (tests, the CLI), lets PGlite load its files itself.
 */
export type WarmedOptions = Awaited<ReturnType<typeof warmedOptions>>

export class PgliteWarmed extends Context.Tag("service-auth/PgliteWarmed")<
  PgliteWarmed,
  { readonly take: () => Promise<WarmedOptions> }
>() {
  static readonly layer = (warming: PgliteWarming | undefined) =>
    Layer.sync(PgliteWarmed, () => {
      let left = warming
      return {
        take: () => {
          const taken = left
          left = undefined
          return taken === undefined ? Promise.resolve({}) : warmedOptions(taken)
        }
      }
    })
}

/** The options to open PGlite with: what was warmed for this server, if anything is left. */
export const takeWarmed: Effect.Effect<() => Promise<WarmedOptions>> = Effect.map(
  Effect.serviceOption(PgliteWarmed),
  Option.match({ onNone: () => () => Promise.resolve({}), onSome: (warmed) => warmed.take })
)

const statementError = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

/**
 * PostgreSQL's default 128 MB of shared buffers is most of PGlite's memory (356 MB resident against
 * 196 MB with 16), while this catalogue of profiles and credentials fits in a few megabytes.
 */
const SETTINGS = { postgresqlconf: ["shared_buffers=16MB"] }

/** Whether `dataDir` already holds a database (PostgreSQL writes PG_VERSION first). */
export const isInitialized = (dataDir: string) => existsSync(join(dataDir, "PG_VERSION"))

export { pgliteDist } from "./PgliteWarmup.js"

/**
 * Creates the database in an empty `dataDir` in a short-lived child process. initdb runs in a
 * WebAssembly instance of its own, and what it allocates stays with the process that ran it (779 MB
 * resident after a fresh start, against 241 MB when opening an existing directory; a worker thread
 * still left 130 MB in the allocator): a child process gives all of it back when it exits.
 */
export const initializeApart = (dataDir: string) =>
  Effect.async<void, SqlError.SqlError>((resume) => {
    const script = `const [pglite, dataDir, settings] = JSON.parse(process.argv[1])
      const { PGlite } = await import(pglite)
      await (await PGlite.create(dataDir, settings)).close()`
    const child = execFile(
      process.execPath,
      ["--input-type=module", "-e", script, JSON.stringify([pathToFileURL(join(pgliteDist(), "index.js")).href, dataDir, SETTINGS])],
      { timeout: 120_000 },
      (error, _stdout, stderr) =>
        resume(
          error === null
            ? Effect.void
            : Effect.fail(
              new SqlError.SqlError({
                cause: new Error(stderr.trim().split("\n").find((line) => line.startsWith("Error")) ?? error.message),
                message: "Failed to create the embedded database"
              })
            )
        )
    )
    return Effect.sync(() => child.kill())
  })

/**
 * PGlite's module (426 KB, with its WebAssembly beside it), imported when an embedded database is
 * opened: a server on PostgreSQL never parses it.
 */
const loadPglite = async (): Promise<typeof PGlite> => (await import("@electric-sql/pglite")).PGlite

/** Opens (or creates) the database in `dataDir`; in memory when `dataDir` is undefined. */
export const make = (options: { readonly dataDir: string | undefined }) =>
  Effect.gen(function*() {
    const takeWarmedOptions = yield* takeWarmed
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const [PGlite, warmed] = await Promise.all([loadPglite(), takeWarmedOptions()])
          const settings = { ...SETTINGS, ...warmed }
          return options.dataDir === undefined
            ? PGlite.create(settings)
            : PGlite.create({ ...settings, fs: new PrivateNodeFs(options.dataDir) })
        },
        catch: (cause) => new SqlError.SqlError({ cause, message: `Failed to open the embedded database` })
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    const exclusive = yield* Effect.makeSemaphore(1)

    const query = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.tryPromise({ try: () => db.query<any>(sql, params as Array<unknown>), catch: statementError })
    const rows = (
      sql: string,
      params: ReadonlyArray<unknown>,
      transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
    ) => Effect.map(query(sql, params), (result) => (transformRows ? transformRows(result.rows) : result.rows))

    const connection: Connection = {
      execute: rows,
      executeRaw: query,
      executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(rows(sql, params, transformRows)),
      executeValues: (sql, params) =>
        Effect.tryPromise({
          try: () => db.query<Array<unknown>>(sql, params as Array<unknown>, { rowMode: "array" }),
          catch: statementError
        }).pipe(Effect.map((result) => result.rows)),
      // The simple query protocol: lets a migration file hold several statements.
      executeUnprepared: (sql, params, transformRows) =>
        params.length > 0
          ? rows(sql, params, transformRows)
          : Effect.tryPromise({ try: () => db.exec(sql), catch: statementError }).pipe(
            Effect.map((results) => {
              const last = results.at(-1)?.rows ?? []
              return transformRows ? transformRows(last as Array<any>) : last
            })
          )
    }

    const acquire = Effect.acquireRelease(exclusive.take(1), () => exclusive.release(1)).pipe(Effect.as(connection))

    return yield* SqlClient.make({
      acquirer: acquire,
      transactionAcquirer: acquire,
      compiler: PgClient.makeCompiler(),
      spanAttributes: [["db.system.name", "postgresql"], ["db.namespace", "pglite"]]
    })
  })

export const layer = (options: { readonly dataDir: string | undefined }) =>
  Layer.scoped(SqlClient.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
