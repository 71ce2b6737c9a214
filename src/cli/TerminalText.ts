/**
 * What `@effect/cli` prints (help, its own errors), fitted to where it goes: ANSI colours only on a
 * terminal and never with NO_COLOR (https://no-color.org), lines wrapped to the terminal's width
 * (80 columns when it is not a terminal), usage lines with the whole command path, and the
 * library's type boilerplate ("A user-defined piece of text.") left out: every argument and option
 * has a description of its own.
 */
import { Console, Effect } from "effect"

const ANSI = /\x1b\[[0-9;]*m/g
export const stripAnsi = (text: string): string => text.replace(ANSI, "")

/** Lines the library adds to every argument or option, which say nothing a reader needs here. */
const BOILERPLATE = new Set([
  "A user-defined piece of text.",
  "A true or false value.",
  "An integer.",
  "This setting is optional."
])
const isBoilerplate = (line: string) => BOILERPLATE.has(line.trim()) || /^\s*One of the following: /.test(line)

interface Output {
  readonly isTTY?: boolean
  readonly columns?: number
}

export interface TerminalSettings {
  /** Colours are kept. */
  readonly colour: boolean
  /** Lines are wrapped at this many columns. */
  readonly width: number
  /** The command words before the one a usage line starts with: `service-auth credentials`. */
  readonly commandPath: ReadonlyArray<string>
}

export const settingsFor = (output: Output, env: NodeJS.ProcessEnv, commandPath: ReadonlyArray<string>): TerminalSettings => ({
  colour: output.isTTY === true && (env.NO_COLOR ?? "") === "",
  width: Math.max(40, Math.min(output.isTTY === true && output.columns ? output.columns : 80, 120)),
  commandPath
})

/** Words of `text` in lines of at most `width` columns, each starting with `indent`. */
const wrapWords = (text: string, width: number, first: string, indent: string): Array<string> => {
  const lines: Array<string> = []
  let line = first
  let empty = true
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line)
      line = indent + word
    } else line = empty ? line + word : `${line} ${word}`
    empty = false
  }
  lines.push(line)
  return lines
}

/** A command list entry, `  - profiles list [--url URL] [--json]      List the profiles.` */
const COMMAND_ENTRY = /^(\s*- )(\S.*?)\s{2,}(\S.*)$/

const wrapLine = (line: string, width: number): Array<string> => {
  if (line.length <= width) return [line]
  const entry = COMMAND_ENTRY.exec(line)
  if (entry !== null) {
    const [, bullet = "", usage = "", description = ""] = entry
    const indent = " ".repeat(bullet.length + 2)
    return [
      ...wrapWords(usage, width, bullet, " ".repeat(bullet.length)),
      ...wrapWords(description, width, indent, indent)
    ]
  }
  // A usage line goes on indented, so the command still stands out.
  if (line.startsWith("$ ")) return wrapWords(line.slice(2), width, "$ ", "    ")
  const indent = /^\s*/.exec(line)?.[0] ?? ""
  return wrapWords(line.slice(indent.length), width, indent, indent)
}

/** The whole text fitted: see the module comment. */
export const fitText = (text: string, settings: TerminalSettings): string => {
  const out: Array<string> = []
  let previousBlank = false
  for (const raw of text.split("\n")) {
    const plain = stripAnsi(raw)
    if (isBoilerplate(plain)) continue
    // Dropping boilerplate leaves blank lines in pairs: keep one.
    const blank = plain.trim() === ""
    if (blank && previousBlank) continue
    previousBlank = blank
    const withPath = plain.startsWith("$ ") && settings.commandPath.length > 0
      ? `$ ${[...settings.commandPath, plain.slice(2)].join(" ")}`
      : undefined
    const line = withPath ?? (settings.colour ? raw : plain)
    if (stripAnsi(line).length <= settings.width) out.push(line)
    else out.push(...wrapLine(stripAnsi(line), settings.width))
  }
  return out.join("\n")
}

/**
 * The command words of `argv` (the arguments after the executable) before the last one that names
 * a command: for `credentials list --json acme` and the tree `credentials → list`, the path to
 * `list` is `service-auth credentials`.
 */
export const commandPathOf = (
  root: string,
  argv: ReadonlyArray<string>,
  subcommands: (path: ReadonlyArray<string>) => ReadonlyArray<string> | undefined
): Array<string> => {
  const path = [root]
  for (const word of argv) {
    const names = subcommands(path)
    if (names === undefined || !names.includes(word)) break
    path.push(word)
  }
  return path.slice(0, -1)
}

/** Runs `effect` with a Console whose log and error lines are fitted to stdout and stderr. */
export const withFittedConsole = (commandPath: ReadonlyArray<string>) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.console, (console) => {
    const fit = (output: Output) => (args: ReadonlyArray<unknown>) =>
      args.map((arg) => (typeof arg === "string" ? fitText(arg, settingsFor(output, process.env, commandPath)) : arg))
    const forStdout = fit(process.stdout)
    const forStderr = fit(process.stderr)
    const fitted: Console.Console = {
      ...console,
      log: (...args) => console.log(...forStdout(args)),
      info: (...args) => console.info(...forStdout(args)),
      error: (...args) => console.error(...forStderr(args))
    }
    return Effect.withConsole(effect, fitted)
  })
