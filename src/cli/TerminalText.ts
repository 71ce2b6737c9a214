/**
 * What `@effect/cli` prints (help, its own errors), fitted to where it goes: ANSI colours only on a
 * terminal and never with NO_COLOR (https://no-color.org), lines wrapped to the terminal's width
 * (80 columns when it is not a terminal), usage lines with the whole command path, and the
 * library's type boilerplate ("A user-defined piece of text.") left out: every argument and option
 * has a description of its own. Help has its title once; an option that may be left out is marked
 * `(optional)` where it is described, and one that may be repeated zero times is bracketed in usage
 * lines (`[--header NAME=VARIABLE]...`). A parse error is one line, `service-auth: <why> (see
 * <command> --help)`.
 */
import { Console, Effect } from "effect"

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g
export const stripAnsi = (text: string): string => text.replace(ANSI, "")

/** Lines the library adds to every argument or option, which say nothing a reader needs here. */
const BOILERPLATE = new Set([
  "A user-defined piece of text.",
  "A true or false value.",
  "An integer.",
  "This setting is optional.",
  // Each option read from a variable names it in its description.
  "This option can be set from environment variables."
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

/** A usage line (`$ …`) or a command list entry (`  - …`): where options are shown as they are typed. */
const isUsage = (line: string) => line.startsWith("$ ") || /^\s*- /.test(line)

/** An option the library shows as `--name VALUE...` (repeated, zero or more times): optional too. */
const REPEATED = /(^|\s)(--[a-z][a-z0-9-]*(?: [A-Za-z][A-Za-z0-9=_|]*)?)\.\.\./g

/** The options a usage line shows in brackets, or repeated: those that may be left out. */
const optionalOptions = (lines: ReadonlyArray<string>): Set<string> => {
  const optional = new Set<string>()
  for (const line of lines.filter((line) => line.startsWith("$ "))) {
    for (const match of line.matchAll(/\[(--[a-z][a-z0-9-]*)/g)) optional.add(match[1]!)
    for (const match of line.matchAll(REPEATED)) optional.add(match[2]!.split(" ")[0]!)
  }
  return optional
}

/** An option's heading where it is described: `--name VALUE` at the start of a line. */
const OPTION_HEADING = /^(--[a-z][a-z0-9-]*)(\s.*)?$/

/** The whole text fitted: see the module comment. */
export const fitText = (text: string, settings: TerminalSettings): string => {
  const out: Array<string> = []
  const raws = text.split("\n")
  const plains = raws.map(stripAnsi)
  // The help's title, `service-auth`, is followed by `service-auth 0.1.0`: once is enough.
  const title = plains[0]?.trim() ?? ""
  const titled = title !== "" && !title.includes(" ") && plains.slice(1).find((line) => line.trim() !== "")?.startsWith(`${title} `)
  const optional = optionalOptions(plains)
  let previousBlank = titled === true
  for (const [index, raw] of raws.entries()) {
    if (index === 0 && titled === true) continue
    let plain = plains[index]!
    if (isBoilerplate(plain)) continue
    // Dropping boilerplate leaves blank lines in pairs: keep one.
    const blank = plain.trim() === ""
    if (blank && previousBlank) continue
    previousBlank = blank
    let changed = false
    const bracketed = isUsage(plain) ? plain.replace(REPEATED, "$1[$2]...") : plain
    if (bracketed !== plain) {
      plain = bracketed
      changed = true
    }
    const heading = OPTION_HEADING.exec(plain)
    if (heading !== null && optional.has(heading[1]!) && !plain.startsWith("$ ")) {
      plain = `${plain} (optional)`
      changed = true
    }
    const withPath = plain.startsWith("$ ") && settings.commandPath.length > 0
      ? `$ ${[...settings.commandPath, plain.slice(2)].join(" ")}`
      : undefined
    const line = withPath ?? (settings.colour && !changed ? raw : plain)
    if (stripAnsi(line).length <= settings.width) out.push(line)
    else out.push(...wrapLine(stripAnsi(line), settings.width))
  }
  return out.join("\n")
}

/**
 * A parse error of the library (a missing argument, an unknown option, a bad value) as one line:
 * `service-auth: Missing argument <service-uuid> (see service-auth credentials list --help)`.
 */
export const parseErrorLine = (text: string, helpCommand: string): string => {
  const why = stripAnsi(text).split("\n").map((line) => line.trim()).filter((line) => line !== "").join(" ")
  const root = helpCommand.split(" ")[0]!
  return `${root}: ${why} (see ${helpCommand} --help)`
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

/**
 * Runs `effect` with a Console whose log lines are fitted to stdout, and whose error lines (the
 * library's parse errors: commands write their own failures to stderr directly, `Output.ts`) are
 * one line each pointing to `helpCommand --help`.
 */
export const withFittedConsole =
  (commandPath: ReadonlyArray<string>, helpCommand: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.console, (console) => {
      const forStdout = (args: ReadonlyArray<unknown>) =>
        args.map((arg) => (typeof arg === "string" ? fitText(arg, settingsFor(process.stdout, process.env, commandPath)) : arg))
      const forStderr = (args: ReadonlyArray<unknown>) =>
        args.map((arg) => (typeof arg === "string" ? parseErrorLine(arg, helpCommand) : arg))
      const fitted: Console.Console = {
        ...console,
        log: (...args) => console.log(...forStdout(args)),
        info: (...args) => console.info(...forStdout(args)),
        error: (...args) => console.error(...forStderr(args))
      }
      return Effect.withConsole(effect, fitted)
    })
