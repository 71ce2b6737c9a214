/**
 * The embedded data directory holds the signing key and the digest key (in the tables and the
 * write-ahead log), so only this process's user may read it: directories 0700, files 0600,
 * whatever the umask.
 *
 * The directory is created 0700; what PGlite writes into it is kept private by PGlite's own file
 * system (`PrivateNodeFs`); what was written by other means (the template's copy, initdb in a child
 * process) and a directory left with looser modes by an earlier version are tightened at start.
 * Nothing process-wide is changed: no umask, no `fs` function replaced.
 */
import { Effect } from "effect"
import fs from "node:fs"
import { join, resolve } from "node:path"
import { describeFileError, StartupError } from "../config/StartupError.js"

const GROUP_AND_OTHER = 0o077
const PRIVATE_DIRECTORY = 0o700
const PRIVATE_FILE = 0o600

/**
 * Sets every path under `root` (and `root`) that other users could read or write to 0700/0600;
 * counts them. Asynchronous: a fresh data directory holds over a thousand files, and a start must
 * not stop answering `/healthz` while it walks them.
 */
const tighten = async (root: string): Promise<number> => {
  const visit = async (path: string): Promise<number> => {
    const stats = await fs.promises.lstat(path)
    if (stats.isSymbolicLink()) return 0
    let tightened = 0
    if ((stats.mode & GROUP_AND_OTHER) !== 0) {
      await fs.promises.chmod(path, stats.isDirectory() ? PRIVATE_DIRECTORY : PRIVATE_FILE)
      tightened++
    }
    if (!stats.isDirectory()) return tightened
    const counts = await Promise.all((await fs.promises.readdir(path)).map((name) => visit(join(path, name))))
    return counts.reduce((sum, count) => sum + count, tightened)
  }
  return visit(root)
}

/** Tightens what was written into `dataDir` by other means than PGlite (the template's copy, initdb in a child). */
export const tightenDataDir = (dataDir: string) => Effect.promise(() => tighten(resolve(dataDir))).pipe(Effect.asVoid)

/** Creates `dataDir` private, or tightens it when it exists with looser modes (said once in the log). */
export const makeDataDirPrivate = (dataDir: string) =>
  Effect.gen(function*() {
    const root = resolve(dataDir)
    const tightened = yield* Effect.tryPromise({
      try: async () => {
        await fs.promises.mkdir(root, { recursive: true, mode: PRIVATE_DIRECTORY })
        return tighten(root)
      },
      catch: (error) => new StartupError({ message: `cannot use DATA_DIR ${dataDir}: ${describeFileError(error)}` })
    })
    if (tightened > 0) {
      yield* Effect.logWarning(
        `DATA_DIR ${dataDir}: ${tightened} files and directories were readable or writable by other users; ` +
          "they are now private to this user (directories 0700, files 0600)"
      )
    }
    return root
  })
