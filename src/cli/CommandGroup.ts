/** A command made of subcommands, such as `service-auth` itself or `service-auth profiles`. */
import { Command, ValidationError } from "@effect/cli"
import { Effect, HashSet } from "effect"

type AnyCommand = Command.Command<any, any, any, any>

/** Each group's subcommands, so that a command line can be checked word by word (`subcommandNames`). */
const groups = new WeakMap<AnyCommand, ReadonlyArray<AnyCommand>>()

/** Run without a subcommand, the group shows its help (which lists them) rather than nothing. */
export const commandGroup = <
  Name extends string,
  const Subcommands extends readonly [AnyCommand, ...Array<AnyCommand>]
>(name: Name, description: string, subcommands: Subcommands) => {
  let self: Command.Command<Name, any, any, any> | undefined
  const group = Command.make(name, {}, () => Effect.fail(ValidationError.helpRequested(self!.descriptor))).pipe(
    Command.withDescription(description),
    Command.withSubcommands(subcommands)
  )
  self = group
  groups.set(group, subcommands)
  return group
}

const nameOf = (command: AnyCommand): string => [...HashSet.values(Command.getNames(command))][0] ?? ""

/**
 * The names of the subcommands at `path` below `root` (`["credentials"]`: list, add, remove);
 * undefined when the path names a command without subcommands, or no command.
 */
export const subcommandNames = (root: AnyCommand, path: ReadonlyArray<string>): ReadonlyArray<string> | undefined => {
  let command: AnyCommand | undefined = root
  for (const word of path) command = command === undefined ? undefined : groups.get(command)?.find((c) => nameOf(c) === word)
  const children = command === undefined ? undefined : groups.get(command)
  return children?.map(nameOf)
}
