/**
 * `service-auth export --out FILE` and `service-auth import --in FILE`: a whole database to one
 * JSON file and back, working on the database itself (docs/operators.md), on the storage layers
 * and migrations the server uses. The embedded database must not be in use: its lock refuses while
 * a server runs on it. The file holds the keys, so it is written 0600 and never to a terminal.
 *
 * stdout gets one summary line (or `--json`); errors are one line on stderr, exit status 1.
 */
import { Command, Options } from "@effect/cli"
import type { Migrator, SqlClient, SqlError } from "@effect/sql"
import { Cause, Config, Effect, Either, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { readFile } from "node:fs/promises"
import { describeFileError, type StartupError } from "../config/StartupError.js"
import * as PgliteClient from "../storage/PgliteClient.js"
import * as Storage from "../storage/Storage.js"
import { isMigrated } from "../transfer/DatabaseSchema.js"
import { checkKeys } from "../transfer/ExportChecks.js"
import { exportDatabase } from "../transfer/ExportDatabase.js"
import { type ExportDocument, parseExport } from "../transfer/ExportFile.js"
import { type ImportSummary, importDatabase } from "../transfer/ImportDatabase.js"
import { countTables, describeCounts, DISTINCT_COUNTS, type TableCounts } from "../transfer/TransferCounts.js"
import { TransferRefused } from "../transfer/TransferErrors.js"
import { writeStderr, writeStdout } from "./Output.js"
import { checkWritable, writePrivateFile } from "./PrivateFile.js"

type Database =
  | { readonly _tag: "Postgres"; readonly url: Redacted.Redacted<string> }
  | { readonly _tag: "Embedded"; readonly dataDir: string }

const databaseOptions = {
  dataDir: Options.text("data-dir").pipe(
    Options.withPseudoName("DIR"),
    Options.withDescription("The embedded database's directory (default: DATA_DIR, else ./data)."),
    Options.optional
  ),
  databaseUrl: Options.text("database-url").pipe(
    Options.withPseudoName("URL"),
    Options.withDescription("PostgreSQL URL (default: DATABASE_URL; prefer the variable: options show in ps)."),
    Options.optional
  ),
  json: Options.boolean("json").pipe(Options.withDescription("Print the summary as one JSON object."))
}

/**
 * An option names the database over the environment; in the environment, as for the server,
 * DATABASE_URL wins over DATA_DIR.
 */
const chooseDatabase = (options: { readonly dataDir: Option.Option<string>; readonly databaseUrl: Option.Option<string> }) =>
  Effect.gen(function*() {
    if (Option.isSome(options.dataDir) && Option.isSome(options.databaseUrl)) {
      return yield* new TransferRefused({ message: "give --data-dir or --database-url, not both" })
    }
    if (Option.isSome(options.databaseUrl)) return { _tag: "Postgres", url: Redacted.make(options.databaseUrl.value) } as const
    if (Option.isSome(options.dataDir)) return { _tag: "Embedded", dataDir: options.dataDir.value } as const
    const url = Option.filter(yield* Config.option(Config.redacted("DATABASE_URL")), (u) => Redacted.value(u) !== "")
    if (Option.isSome(url)) return { _tag: "Postgres", url: url.value } as const
    const dataDir = yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data"))
    return { _tag: "Embedded", dataDir: dataDir === "" ? "./data" : dataDir } as const
  }).pipe(Effect.mapError((error) => error instanceof TransferRefused ? error : new TransferRefused({ message: String(error) })))

const describeDatabase = (database: Database) =>
  database._tag === "Postgres"
    ? `PostgreSQL at ${Storage.describeDatabase(Redacted.value(database.url))}`
    : `the embedded database in ${database.dataDir}`

/**
 * The migrated database, as the server opens it. The source of an export must already be one (a
 * mistyped URL or directory must not get a schema created in it).
 */
const openDatabase = (
  database: Database,
  options: { readonly mustExist: boolean }
): Layer.Layer<SqlClient.SqlClient, StartupError | TransferRefused | Migrator.MigrationError | SqlError.SqlError> => {
  if (database._tag === "Embedded") {
    return options.mustExist && !PgliteClient.isInitialized(database.dataDir)
      ? Layer.fail(new TransferRefused({ message: `DATA_DIR ${database.dataDir} holds no database` }))
      : Storage.layerMigrated(Storage.layerEmbeddedClient(database.dataDir))
  }
  const client = Storage.layerPostgresClient(database.url)
  if (!options.mustExist) return Storage.layerMigrated(client)
  const existing = Layer.effectDiscard(Effect.flatMap(isMigrated, (migrated) =>
    migrated
      ? Effect.void
      : Effect.fail(new TransferRefused({ message: `${describeDatabase(database)} holds no service-auth database` }))))
  return Storage.layerMigrated(Layer.provideMerge(existing, client))
}

const countsJson = (counts: TableCounts) => ({
  profiles: counts.profiles,
  environments: counts.environments,
  services: counts.services,
  credentials: counts.credentials,
  deleted_credentials: counts.deletedCredentials,
  keys: counts.keys,
  signing_keys: counts.signingKeys,
  audit_events: counts.auditEvents,
  trusted_issuers: counts.trustedIssuers
})

/** One line on stderr naming what went wrong; a defect (a bug) with its trace. Never a secret. */
const reportFailure = (command: string) => (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    if (Cause.isInterruptedOnly(cause)) return
    const failure = Cause.failureOption(cause).pipe(Option.getOrUndefined) as
      | { readonly _tag?: unknown; readonly message?: unknown; readonly cause?: unknown }
      | undefined
    const sqlCause = failure?._tag === "SqlError" ? failure.cause as { readonly message?: unknown } | undefined : undefined
    const message = typeof sqlCause?.message === "string"
      ? `database error: ${sqlCause.message}`
      : typeof failure?.message === "string" && failure.message !== ""
      ? failure.message
      : `unexpected failure:\n${Cause.pretty(cause)}`
    globalThis.console.error(`service-auth ${command}: ${message}`)
  })

/** Warnings (a data directory tightened, say) on stderr: stdout is the summary, or the export itself. */
const stderrLogger = (command: string) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) =>
      globalThis.console.error(
        `service-auth ${command}: ${logLevel.label.toLowerCase()}: ${Array.isArray(message) ? message.join(" ") : String(message)}`
      )
    )
  )

const runCommand = (command: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.tapErrorCause(reportFailure(command)),
    Logger.withMinimumLogLevel(LogLevel.Warning),
    Effect.provide(stderrLogger(command))
  )

const exportCommand = Command.make(
  "export",
  {
    ...databaseOptions,
    out: Options.text("out").pipe(
      Options.withPseudoName("FILE"),
      Options.withDescription("The file to write (mode 0600), or - for stdout when it is not a terminal.")
    ),
    force: Options.boolean("force").pipe(Options.withDescription("Replace the file when it exists."))
  },
  (options) =>
    Effect.gen(function*() {
      const database = yield* chooseDatabase(options)
      const toStdout = options.out === "-"
      if (toStdout && process.stdout.isTTY) {
        return yield* new TransferRefused({
          message: "the export holds the keys: it is not written to a terminal (redirect stdout, or use --out FILE)"
        })
      }
      if (!toStdout) yield* checkWritable(options.out, { replace: options.force })
      const document: ExportDocument = yield* exportDatabase().pipe(
        Effect.provide(openDatabase(database, { mustExist: true }))
      )
      const text = `${JSON.stringify(document, null, 2)}\n`
      if (toStdout) yield* writeStdout(text)
      else yield* writePrivateFile(options.out, text, { replace: options.force })
      const counts = countTables(document.tables)
      const summary = options.json
        ? JSON.stringify({ exported: countsJson(counts), from: describeDatabase(database), to: options.out })
        : `exported ${describeCounts(counts)} from ${describeDatabase(database)} to ${toStdout ? "stdout" : options.out}`
      // With --out -, stdout is the export itself.
      yield* toStdout ? writeStderr(`${summary}\n`) : writeStdout(`${summary}\n`)
    }).pipe(runCommand("export"))
).pipe(
  Command.withDescription(
    "Write the whole database (catalogue, credential digests, signing and digest keys as stored, audit trail) to one JSON file, mode 0600. " +
      "The embedded database must not be in use by a server."
  )
)

const describeImport = (summary: ImportSummary, database: Database) => {
  if (summary.mode === "replace") return `imported ${describeCounts(summary.file)} into ${describeDatabase(database)}`
  const present = DISTINCT_COUNTS.reduce((sum, key) => sum + summary.file[key] - summary.added[key], 0)
  return `merged into ${describeDatabase(database)}: added ${describeCounts(summary.added)}; ${present} already present` +
    (summary.revoked > 0 ? `; ${summary.revoked} credentials deleted as in the file` : "")
}

const importCommand = Command.make(
  "import",
  {
    ...databaseOptions,
    in: Options.text("in").pipe(Options.withPseudoName("FILE"), Options.withDescription("The file written by export.")),
    merge: Options.boolean("merge").pipe(
      Options.withDescription("Into a database that is not empty: add what is missing (a conflicting row refuses).")
    )
  },
  (options) =>
    Effect.gen(function*() {
      const database = yield* chooseDatabase(options)
      const text = yield* Effect.tryPromise({
        try: () => readFile(options.in, "utf8"),
        catch: (error) => new TransferRefused({ message: `cannot read ${options.in}: ${describeFileError(error)}` })
      })
      const document = yield* Either.mapLeft(
        parseExport(text),
        (invalid) => new TransferRefused({ message: `${options.in}: ${invalid.message}; nothing was imported` })
      )
      // The keys are checked as the server will load them: a file that imports must also start.
      yield* checkKeys(document.tables).pipe(
        Effect.mapError((invalid) => new TransferRefused({ message: `${options.in}: ${invalid.message}; nothing was imported` }))
      )
      const summary = yield* importDatabase(document, { merge: options.merge }).pipe(
        Effect.provide(openDatabase(database, { mustExist: false }))
      )
      const result = options.json
        ? JSON.stringify({
          mode: summary.mode,
          into: describeDatabase(database),
          file: countsJson(summary.file),
          added: countsJson(summary.added),
          revoked_credentials: summary.revoked,
          replaced_keys: summary.replacedKeys,
          restart_needed: summary.restartNeeded
        })
        : describeImport(summary, database)
      yield* writeStdout(`${result}\n`)
      const replaced = `service-auth import: the keys this database held (${summary.replacedKeys.join(", ")}) were replaced by the file's`
      if (summary.restartNeeded) {
        // The digest key is loaded once, at start; a signing key from before rotation is adopted only at start.
        yield* writeStderr(`${replaced}: restart every server running on it\n`)
      } else if (summary.replacedKeys.length > 0) {
        // Running servers reload the signing keys every 2 seconds.
        yield* writeStderr(
          `${replaced}: servers running on it use the new signing keys within 2 seconds, without a restart ` +
            "(given the KEY_ENCRYPTION_KEY they are sealed with)\n"
        )
      }
    }).pipe(runCommand("import"))
).pipe(
  Command.withDescription(
    "Load a file written by export, in one transaction. Refuses a database that is not empty unless --merge. " +
      "The embedded database must not be in use by a server."
  )
)

export const transferCommands = [exportCommand, importCommand] as const
