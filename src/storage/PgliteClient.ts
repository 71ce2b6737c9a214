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
import { PGlite } from "@electric-sql/pglite"
import { Effect, Layer, Stream } from "effect"

const statementError = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to execute statement" })

/**
 * PostgreSQL's default 128 MB of shared buffers is most of PGlite's memory (356 MB resident against
 * 196 MB with 16), while this catalogue of profiles and credentials fits in a few megabytes.
 */
const SETTINGS = { postgresqlconf: ["shared_buffers=16MB"] }

/** Opens (or creates) the database in `dataDir`; in memory when `dataDir` is undefined. */
export const make = (options: { readonly dataDir: string | undefined }) =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          options.dataDir === undefined ? PGlite.create(SETTINGS) : PGlite.create(options.dataDir, SETTINGS),
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
