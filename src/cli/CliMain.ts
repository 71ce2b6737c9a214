/**
 * `service-auth`, the operator's command line (the package's `bin`; `npm run cli -- ...` in a
 * checkout): the admin commands talk to a running server's admin API (`AdminCommands.ts`); `export`
 * and `import` work on the database itself (`TransferCommands.ts`). Global options may come before
 * the command (`GlobalOptions.ts`). What `@effect/cli` prints is fitted to the terminal, and its
 * parse errors are one `service-auth: …` line pointing to the command's `--help`
 * (`TerminalText.ts`).
 */
import { CliConfig, Command, HelpDoc, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import type { Teardown } from "@effect/platform/Runtime"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { SERVICE_VERSION } from "../config/Version.js"
import { adminCommands } from "./AdminCommands.js"
import { commandGroup, subcommandNames } from "./CommandGroup.js"
import { commandOf, placeGlobalOptions } from "./GlobalOptions.js"
import { note } from "./Output.js"
import { commandPathOf, withFittedConsole } from "./TerminalText.js"
import { transferCommands } from "./TransferCommands.js"

const NAME = "service-auth"

const serviceAuth = commandGroup(NAME, "Operate a service-auth server and its database.", [
  ...adminCommands,
  ...transferCommands
])

const cli = Command.run(serviceAuth, {
  name: NAME,
  version: SERVICE_VERSION,
  footer: HelpDoc.p(`Every command takes -h or --help; ${NAME} --version prints the version.`)
})

/** The subcommands' names under a command path (`["service-auth", "credentials"]`); undefined for a leaf. */
const subcommandsAt = (path: ReadonlyArray<string>) => subcommandNames(serviceAuth, path.slice(1))

/**
 * `@effect/cli`'s built-in options that do nothing useful here: `--wizard` (prompts for what the
 * help already says), `--completions` (scripts for a command few type by hand) and `--log-level`
 * (the CLI logs nothing). They are hidden from the help and refused like any unknown option.
 */
const REFUSED_OPTIONS = ["--wizard", "--completions", "--log-level"]

/**
 * What the library would answer badly, answered here first (exit 2): a refused option, and a word
 * that is not a subcommand of the group before it (the library names the wrong group).
 */
const commandLineProblem = (argv: ReadonlyArray<string>): string | undefined => {
  const refused = argv.find((arg) => REFUSED_OPTIONS.includes(arg.split("=")[0]!))
  if (refused !== undefined) return `${refused.split("=")[0]} is not an option of ${NAME} (see ${NAME} --help)`
  const path = [NAME]
  for (const word of argv) {
    const names = subcommandsAt(path)
    if (names === undefined || word.startsWith("-")) return undefined
    if (!names.includes(word)) {
      const group = path.join(" ")
      return `${JSON.stringify(word)} is not a command of ${group}: use one of ${names.join(", ")} (see ${group} --help)`
    }
    path.push(word)
  }
  return undefined
}

/**
 * Commands print their own failures; the exit code says what kind: 2 for a command line
 * @effect/cli refused (it has printed why), 130 when Ctrl-C (or SIGTERM) stopped a command, 1 for
 * any other failure.
 */
const exitCode: Teardown = (exit, onExit) => {
  if (Exit.isSuccess(exit)) return onExit(0)
  if (Cause.isInterruptedOnly(exit.cause)) return onExit(130)
  const failure = Cause.failureOption(exit.cause)
  onExit(Option.isSome(failure) && ValidationError.isValidationError(failure.value) ? 2 : 1)
}

// Global options (--json, --url) are read after the command's words, wherever they were written.
const argv = placeGlobalOptions(NAME, process.argv.slice(2), subcommandsAt)
const problem = commandLineProblem(argv)

const program = problem !== undefined
  ? Effect.zipRight(note(problem), Effect.fail(ValidationError.invalidArgument(HelpDoc.p(problem))))
  : cli([...process.argv.slice(0, 2), ...argv]).pipe(
    withFittedConsole(commandPathOf(NAME, argv, subcommandsAt), commandOf(NAME, argv, subcommandsAt)),
    Effect.provide(Layer.merge(NodeContext.layer, CliConfig.layer({ showBuiltIns: false })))
  )

program.pipe(NodeRuntime.runMain({ disableErrorReporting: true, teardown: exitCode }))
