/**
 * The embedded data directory holds the signing key and the digest key (in the tables and the
 * write-ahead log), so only this process's user may read it: directories 0700, files 0600,
 * whatever the umask.
 *
 * The process umask alone is not enough: PGlite's Emscripten file system creates each file and then
 * sets its mode itself (`chmod` to 0666 or 0644, PostgreSQL's modes under Emscripten's own umask).
 * So, for paths inside a private directory, group and other bits are masked out of every mode it
 * sets; files it creates before that `chmod` are covered by the process umask (0077); and a
 * directory left with looser modes by an earlier version is tightened at start.
 */
import { Effect } from "effect"
import fs from "node:fs"
import { isMainThread } from "node:worker_threads"
import { join, resolve, sep } from "node:path"
import { describeFileError, StartupError } from "../config/StartupError.js"

const GROUP_AND_OTHER = 0o077
const PRIVATE_DIRECTORY = 0o700
const PRIVATE_FILE = 0o600

const privateRoots = new Set<string>()

const isPrivatePath = (path: fs.PathLike): boolean => {
  const absolute = resolve(String(path))
  for (const root of privateRoots) if (absolute === root || absolute.startsWith(root + sep)) return true
  return false
}

/** The path behind a descriptor (Linux), to tell whether an `fchmod` targets a private file. */
const pathOfDescriptor = (fd: number): string | undefined => {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`)
  } catch {
    return undefined
  }
}

const privateMode = (mode: fs.Mode): fs.Mode => typeof mode === "number" ? mode & ~GROUP_AND_OTHER : mode

let hooked = false
/** Masks the modes PGlite sets on private paths. Installed once, for the life of the process. */
const hookModeChanges = () => {
  if (hooked) return
  hooked = true
  const chmodSync = fs.chmodSync
  const fchmodSync = fs.fchmodSync
  fs.chmodSync = (path, mode) => chmodSync(path, isPrivatePath(path) ? privateMode(mode) : mode)
  fs.fchmodSync = (fd, mode) => {
    const path = pathOfDescriptor(fd)
    return fchmodSync(fd, path === undefined || isPrivatePath(path) ? privateMode(mode) : mode)
  }
}

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

/** Tightens what was written into `dataDir` by code the mode hook does not reach (a worker thread). */
export const tightenDataDir = (dataDir: string) => Effect.promise(() => tighten(resolve(dataDir))).pipe(Effect.asVoid)

/**
 * Creates `dataDir` private, or tightens it when it exists with looser modes (said once in the log),
 * and keeps what PGlite writes into it private for as long as the scope lasts.
 */
export const makeDataDirPrivate = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const root = resolve(dataDir)
      // Files are created owner-only from the start (the umask is per process; not settable in a worker).
      if (isMainThread) process.umask(GROUP_AND_OTHER)
      const tightened = yield* Effect.tryPromise({
        try: async () => {
          await fs.promises.mkdir(root, { recursive: true, mode: PRIVATE_DIRECTORY })
          hookModeChanges()
          privateRoots.add(root)
          return tighten(root)
        },
        catch: (error) =>
          new StartupError({ message: `cannot use DATA_DIR ${dataDir}: ${describeFileError(error)}` })
      })
      if (tightened > 0) {
        yield* Effect.logWarning(
          `DATA_DIR ${dataDir}: ${tightened} files and directories were readable or writable by other users; ` +
            "they are now private to this user (directories 0700, files 0600)"
        )
      }
      return root
    }),
    (root) => Effect.sync(() => privateRoots.delete(root))
  )
