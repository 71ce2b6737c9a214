/**
 * A fresh embedded database, made once by the build (`scripts/build.mjs`) in `dist/`, so that a first
 * start on an empty DATA_DIR copies it instead of running PostgreSQL's initdb in WebAssembly: initdb
 * was most of a fresh start (10 s of 11 on a loaded machine), a copy takes milliseconds.
 *
 * The template holds nothing secret or per-installation that matters here: initdb's catalogue and
 * settings only. Keys, the digest key and the schema are written at start, after the copy, as on a
 * directory initdb made. It is named after the PGlite version that made it, so a template from
 * another version is never used; without one (a build that could not make it), start-up runs
 * initdb as before.
 */
import { SqlError } from "@effect/sql"
import { Effect } from "effect"
import fs from "node:fs"
import { join } from "node:path"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import * as PgliteClient from "../storage/PgliteClient.js"

/** What PostgreSQL writes first and the start-up reads as "initialized": copied last. */
const VERSION_FILE = "PG_VERSION"

const pgliteVersion = (): string => {
  const manifest = JSON.parse(fs.readFileSync(join(PgliteClient.pgliteDist(), "..", "package.json"), "utf8"))
  return String((manifest as { version?: unknown }).version)
}

/** Where the build leaves the template for the installed PGlite. */
export const templateDir = (): string => join(PACKAGE_ROOT, "dist", `embedded-template-pglite-${pgliteVersion()}`)

/** Makes the template (the build's step): initdb in a child process, into a folder renamed into place when complete. */
export const build = (target: string = templateDir()): Effect.Effect<string, SqlError.SqlError> =>
  Effect.suspend(() => {
    const partial = `${target}.partial`
    fs.rmSync(partial, { recursive: true, force: true })
    return PgliteClient.initializeApart(partial).pipe(
      Effect.flatMap(() =>
        Effect.try({
          try: () => {
            fs.rmSync(target, { recursive: true, force: true })
            fs.renameSync(partial, target)
            return target
          },
          catch: (cause) => new SqlError.SqlError({ cause, message: "Failed to keep the embedded database template" })
        })
      )
    )
  })

/**
 * Copies the template into `dataDir` (which may hold the lock and admin-token files already);
 * false when there is no template for this PGlite. `PG_VERSION` goes last, so a copy cut short is
 * not taken for a database by the next start, which copies again.
 */
export const copyInto = (dataDir: string, template: string = templateDir()): Effect.Effect<boolean, Error> =>
  Effect.tryPromise({
    // Asynchronous, like the whole start before the database opens: `/healthz` keeps answering.
    try: async () => {
      if (!fs.existsSync(join(template, VERSION_FILE))) return false
      // Overwrites what a copy cut short left (there is no PG_VERSION yet, so it is no database).
      await fs.promises.cp(template, dataDir, {
        recursive: true,
        force: true,
        filter: (source) => source !== join(template, VERSION_FILE)
      })
      await fs.promises.copyFile(join(template, VERSION_FILE), join(dataDir, VERSION_FILE))
      return true
    },
    catch: (cause) => cause instanceof Error ? cause : new Error(String(cause))
  })
