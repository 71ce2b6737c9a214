/**
 * One process per embedded data directory. Two processes writing one PGlite directory would
 * corrupt it (and the embedded read cache assumes a single writer), so the second refuses to start
 * with a clear message. A lock left by a process that no longer runs is taken over.
 */
import { Effect } from "effect"
import { openSync, readFileSync, rmSync, writeSync, closeSync } from "node:fs"
import { join } from "node:path"

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const acquire = (file: string): void => {
  try {
    const fd = openSync(file, "wx", 0o600)
    writeSync(fd, String(process.pid))
    closeSync(fd)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    const owner = Number(readFileSync(file, "utf8").trim())
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isRunning(owner)) {
      throw new Error(
        `the data directory is in use by process ${owner} (${file}); one process per DATA_DIR, ` +
          "or use DATABASE_URL (PostgreSQL) to run several instances"
      )
    }
    rmSync(file, { force: true })
    acquire(file)
  }
}

/** Holds the lock for the scope's lifetime. */
export const lockDataDir = (dataDir: string) => {
  const file = join(dataDir, "service-auth.lock")
  return Effect.acquireRelease(
    Effect.try({ try: () => acquire(file), catch: (error) => error as Error }),
    () => Effect.sync(() => rmSync(file, { force: true }))
  )
}
