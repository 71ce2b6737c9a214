/** `export` and `import` (placeholder until they are written). */
import { Command } from "@effect/cli"

export const transferCommands = [Command.make("export"), Command.make("import")] as const
