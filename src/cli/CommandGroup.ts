/** A command made of subcommands, such as `service-auth` itself or `service-auth profiles`. */
import { Command, ValidationError } from "@effect/cli"
import { Effect } from "effect"

/** Run without a subcommand, the group shows its help (which lists them) rather than nothing. */
export const commandGroup = <
  Name extends string,
  const Subcommands extends readonly [Command.Command<any, any, any, any>, ...Array<Command.Command<any, any, any, any>>]
>(name: Name, description: string, subcommands: Subcommands) => {
  let self: Command.Command<Name, any, any, any> | undefined
  const group = Command.make(name, {}, () => Effect.fail(ValidationError.helpRequested(self!.descriptor))).pipe(
    Command.withDescription(description),
    Command.withSubcommands(subcommands)
  )
  self = group
  return group
}
