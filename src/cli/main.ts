/**
 * `service-auth`, the operator's command line (the package's `bin`; `npm run cli -- ...` in a
 * checkout): the admin commands talk to a running server's admin API (`AdminCommands.ts`); `export`
 * and `import` work on the database itself (`TransferCommands.ts`).
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { adminCommands } from "./AdminCommands.js"
import { transferCommands } from "./TransferCommands.js"

const serviceAuth = Command.make("service-auth").pipe(
  Command.withDescription("Operate a service-auth server and its database."),
  Command.withSubcommands([...adminCommands, ...transferCommands])
)

const cli = Command.run(serviceAuth, { name: "service-auth", version: "0.1.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain({ disableErrorReporting: true }))
