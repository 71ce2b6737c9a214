/**
 * `service-auth`, the operator's command line (the package's `bin`; `npm run cli -- ...` in a
 * checkout): the admin commands talk to a running server's admin API (`AdminCommands.ts`); `export`
 * and `import` work on the database itself (`TransferCommands.ts`).
 */
import { Command, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import type { Teardown } from "@effect/platform/Runtime"
import { Cause, Effect, Exit, Option } from "effect"
import { adminCommands } from "./AdminCommands.js"
import { commandGroup } from "./CommandGroup.js"
import { transferCommands } from "./TransferCommands.js"

const serviceAuth = commandGroup("service-auth", "Operate a service-auth server and its database.", [
  ...adminCommands,
  ...transferCommands
])

const cli = Command.run(serviceAuth, { name: "service-auth", version: "0.1.0" })

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

cli(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true, teardown: exitCode })
)
