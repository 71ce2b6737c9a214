/**
 * Which admin token the CLI sends, and where it came from (so that a refusal can name its source):
 * `ADMIN_TOKEN`, or an embedded server's generated token on this machine only.
 */
import { Config, Effect, Option, Redacted, Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { ADMIN_TOKEN_FILE } from "../admin/AdminTokenFile.js"

/** `ADMIN_TOKEN` is unset or empty. */
export class AdminTokenMissing extends Schema.TaggedError<AdminTokenMissing>()("AdminTokenMissing", {
  message: Schema.String
}) {}

/** Whether `base` names this machine: only then may the local data directory's token be sent to it. */
const isLoopback = (base: string) => {
  const host = new URL(base).hostname
  return host === "localhost" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host)
}

/** The token the CLI sends and where it came from, so that a refusal can name its source. */
export interface AdminTokenInUse {
  readonly token: Redacted.Redacted
  readonly source: string
}

/**
 * `ADMIN_TOKEN`; or, for a server on this machine, the token an embedded server generated into
 * `DATA_DIR/admin-token` (./data by default), which only this user can read. Never sent elsewhere:
 * that token is the local server's.
 */
export const adminTokenFor = (base: string): Effect.Effect<AdminTokenInUse, AdminTokenMissing> =>
  Effect.gen(function*() {
    const configured = yield* Config.option(Config.redacted("ADMIN_TOKEN")).pipe(
      Effect.orElseSucceed(() => Option.none<Redacted.Redacted>())
    )
    if (Option.isSome(configured) && Redacted.value(configured.value) !== "") {
      return { token: configured.value, source: "ADMIN_TOKEN" }
    }
    const dataDir = yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data"), Effect.orElseSucceed(() => "./data"))
    const stored = isLoopback(base)
      ? yield* Effect.sync(() => {
        try {
          return readFileSync(join(dataDir, ADMIN_TOKEN_FILE), "utf8").trim()
        } catch {
          return ""
        }
      })
      : ""
    if (stored !== "") {
      return {
        token: Redacted.make(stored),
        source: `${
          join(dataDir, ADMIN_TOKEN_FILE)
        } (ADMIN_TOKEN is not set, so the embedded server's file was read; set ADMIN_TOKEN, or DATA_DIR for another data directory)`
      }
    }
    return yield* new AdminTokenMissing({
      message: "ADMIN_TOKEN is not set: export the server's admin token in ADMIN_TOKEN (it is never taken as an " +
        "argument; for an embedded server on this machine, DATA_DIR/admin-token is read when it exists)"
    })
  })
