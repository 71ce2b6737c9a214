/**
 * The admin token of an embedded server started without ADMIN_TOKEN or ADMIN_TOKENS: 256 random
 * bits generated on the first start and kept in `DATA_DIR/admin-token` (mode 0600), so that it is
 * the same at every start and never printed. The file is written whole under another name, then
 * linked into place, so it is never seen partly written, never readable by others, and two
 * processes starting at once agree on one token.
 */
import { Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import fs from "node:fs"
import { join, resolve } from "node:path"
import { describeFileError, StartupError } from "../config/StartupError.js"

export const ADMIN_TOKEN_FILE = "admin-token"

export interface DataDirAdminToken {
  readonly token: Redacted.Redacted<string>
  /** The file's absolute path, for the start-up line. */
  readonly path: string
  /** Whether this start generated it. */
  readonly created: boolean
}

const read = (path: string): string | undefined => {
  try {
    return fs.readFileSync(path, "utf8").trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

/** Writes `token` to `path` unless it exists; false when another process was first. */
const create = (path: string, token: string): boolean => {
  const temporary = `${path}.${process.pid}.tmp`
  const fd = fs.openSync(temporary, "wx", 0o600)
  try {
    fs.writeFileSync(fd, `${token}\n`)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  try {
    fs.linkSync(temporary, path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  } finally {
    fs.rmSync(temporary, { force: true })
  }
}

export const loadOrCreateAdminToken = (dataDir: string): Effect.Effect<DataDirAdminToken, StartupError> =>
  Effect.gen(function*() {
    const path = resolve(join(dataDir, ADMIN_TOKEN_FILE))
    yield* Effect.try({
      try: () => fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 }),
      catch: (error) => new StartupError({ message: `cannot use DATA_DIR ${dataDir}: ${describeFileError(error)}` })
    })
    return yield* Effect.try({
      try: (): DataDirAdminToken => {
        const existing = read(path)
        if (existing === undefined) {
          const created = create(path, randomBytes(32).toString("base64url"))
          return { token: Redacted.make(read(path) ?? ""), path, created }
        }
        return { token: Redacted.make(existing), path, created: false }
      },
      catch: (error) => new StartupError({ message: `cannot use ${path}: ${describeFileError(error)}` })
    }).pipe(
      Effect.filterOrFail(
        (stored) => Redacted.value(stored.token).length > 0,
        () => new StartupError({ message: `${path} is empty: delete it to generate a new admin token, or set ADMIN_TOKEN` })
      )
    )
  })
