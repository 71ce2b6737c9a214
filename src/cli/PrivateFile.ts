/**
 * Writes a file that holds key material: readable by this user only (0600) from its first byte
 * whatever the umask, complete or absent (written beside it under a temporary name, then linked or
 * renamed into place), and never over an existing file unless told to.
 */
import { Data, Effect } from "effect"
import { randomBytes } from "node:crypto"
import fs from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { describeFileError } from "../config/StartupError.js"

export class PrivateFileError extends Data.TaggedError("PrivateFileError")<{ readonly message: string }> {}

const PRIVATE_FILE = 0o600

const alreadyExists = (path: string) => new PrivateFileError({ message: `${path} already exists; --force replaces it` })

/** Fails early, before any work, when `path` exists and may not be replaced. */
export const checkWritable = (path: string, options: { readonly replace: boolean }) =>
  Effect.suspend(() => (!options.replace && fs.existsSync(path) ? Effect.fail(alreadyExists(path)) : Effect.void))

export const writePrivateFile = (path: string, text: string, options: { readonly replace: boolean }) =>
  Effect.try({
    try: () => {
      const temporary = join(dirname(resolve(path)), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`)
      const fd = fs.openSync(temporary, "wx", PRIVATE_FILE)
      try {
        try {
          fs.fchmodSync(fd, PRIVATE_FILE) // exactly 0600, even under a umask that would leave less
          fs.writeFileSync(fd, text)
          fs.fsyncSync(fd)
        } finally {
          fs.closeSync(fd)
        }
        if (options.replace) fs.renameSync(temporary, path)
        // A hard link fails with EEXIST rather than replace: no window where an existing file is lost.
        else fs.linkSync(temporary, path)
      } finally {
        fs.rmSync(temporary, { force: true })
      }
    },
    catch: (error) =>
      (error as NodeJS.ErrnoException).code === "EEXIST"
        ? alreadyExists(path)
        : new PrivateFileError({ message: `cannot write ${path}: ${describeFileError(error)}` })
  })
