/**
 * Why the server could not start, in one line that names what is wrong and where (a setting, the
 * port, the database, the key file). `ServerMain.ts` prints it and exits non-zero; never a stack trace.
 */
import { ConfigError, Data } from "effect"

export class StartupError extends Data.TaggedError("StartupError")<{ readonly message: string }> {}

/** `invalid setting PORT: ...` for each leaf of a configuration error. */
export const fromConfigError = (error: ConfigError.ConfigError): StartupError => {
  const problems: Array<string> = []
  const visit = (e: ConfigError.ConfigError): void => {
    switch (e._op) {
      case "And":
      case "Or":
        visit(e.left)
        visit(e.right)
        return
      case "InvalidData":
      case "MissingData":
      case "SourceUnavailable":
      case "Unsupported": {
        const name = e.path.join("_")
        problems.push(name !== "" && !e.message.startsWith(name) ? `${name}: ${e.message}` : e.message)
      }
    }
  }
  visit(error)
  return new StartupError({ message: `invalid setting: ${problems.join("; ")}` })
}

/** A file system error code in words, for messages about files named in settings. */
export const describeFileError = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  switch (code) {
    case "ENOENT":
      return "no such file or directory"
    case "EACCES":
    case "EPERM":
      return "permission denied"
    case "EISDIR":
      return "is a directory"
    case "ENOTDIR":
      return "a part of the path is not a directory"
    case "EROFS":
      return "read-only file system"
    default:
      return code ?? String(error)
  }
}
