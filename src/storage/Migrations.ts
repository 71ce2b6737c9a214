/**
 * Applies `migrations/NNNN_name.sql` in order with `@effect/sql`'s `Migrator`. `PgMigrator`'s
 * file-system loader only imports `.js`/`.ts` modules, so this loader reads the SQL files itself and
 * runs each one through the simple query protocol (a file may hold several statements).
 */
import { Migrator, SqlClient } from "@effect/sql"
import { Effect, Layer, Schedule } from "effect"
import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"

export const MIGRATIONS_DIRECTORY = join(PACKAGE_ROOT, "migrations")

const MIGRATION_FILE = /^(\d+)_([A-Za-z0-9_-]+)\.sql$/

export const sqlFileLoader = (directory: string): Migrator.Loader =>
  Effect.tryPromise({
    try: () => readdir(directory),
    catch: (cause) =>
      new Migrator.MigrationError({ reason: "import-error", message: `Cannot read ${directory}: ${cause}` })
  }).pipe(
    Effect.map((files) =>
      files
        .flatMap((file) => {
          const match = MIGRATION_FILE.exec(file)
          return match === null ? [] : [[Number(match[1]), match[2]!, file] as const]
        })
        .sort(([a], [b]) => a - b)
        .map(([id, name, file]): Migrator.ResolvedMigration => [
          id,
          name,
          Effect.promise(() => readFile(`${directory}/${file}`, "utf8")).pipe(
            Effect.map((text) =>
              Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text).unprepared)
            )
          )
        ])
    )
  )

/** Where the migrator records the migrations applied (bookkeeping, never exported). */
export const MIGRATIONS_TABLE = "service_auth_migrations"

const runMigrator = Migrator.make({})

/**
 * Brings the schema up to date. Instances starting together on one database serialise on the
 * migrator's table lock; the one that loses the race to create that table retries.
 */
export const migrate = runMigrator({
  loader: sqlFileLoader(MIGRATIONS_DIRECTORY),
  table: MIGRATIONS_TABLE
}).pipe(
  Effect.retry({ times: 5, schedule: Schedule.spaced("200 millis") }),
  Effect.withSpan("Migrations.migrate")
)

export const layer = Layer.effectDiscard(migrate)
