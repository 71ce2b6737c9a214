/** The admin commands (placeholder until they are written). */
import { Command } from "@effect/cli"

export const adminCommands = [Command.make("profiles")] as const
