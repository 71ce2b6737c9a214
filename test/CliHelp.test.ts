/**
 * The admin CLI's help that fits a terminal: piped (no colour, at most 80 columns) and on a terminal
 * (colours unless NO_COLOR, wrapped to the terminal's width), from the built `dist/cli.mjs`.
 */
import { spawn } from "node:child_process"
import { describe, expect, it } from "vitest"
import { CLI, CLI_TEST_DEADLINE_MS, cli, HAS_SCRIPT, ROOT } from "./support/CliProcess.js"

/** `service-auth <args>` under a pseudo-terminal of `columns` columns (script(1)); everything it printed. */
const helpOnTerminal = (args: string, columns: number, env: Readonly<Record<string, string>> = {}) =>
  new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn("script", ["-qec", `stty cols ${columns} rows 50; ${process.execPath} ${CLI} ${args}`, "/dev/null"], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, output: output.replace(/\r\n/g, "\n") })
    })
  })

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/

// eslint-disable-next-line no-control-regex
const stripAnsi = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "")

describe("help that fits a terminal", () => {
  const SUBCOMMAND_HELP = ["credentials", "remove", "--help"]

  it("piped: no colour, lines of at most 80 columns, the full command in usage, a description for everything", async () => {
    for (const args of [["--help"], ["credentials"], SUBCOMMAND_HELP, ["services", "create", "--help"], ["rotate", "--help"]]) {
      const run = await cli(args, { ADMIN_TOKEN: undefined })
      expect(run.code, args.join(" ")).toBe(0)
      expect(run.stdout, args.join(" ")).not.toMatch(ANSI)
      const long = run.stdout.split("\n").filter((line) => line.length > 80)
      expect(long, args.join(" ")).toEqual([])
      for (const boilerplate of ["A user-defined piece of text", "A true or false value", "--wizard", "--completions", "--log-level"]) {
        expect(run.stdout, `${args.join(" ")}: ${boilerplate}`).not.toContain(boilerplate)
      }
    }
    const remove = await cli(SUBCOMMAND_HELP)
    expect(remove.stdout).toContain("$ service-auth credentials remove [(-y, --yes)] [--url URL] [--json] <profile>\n")
    expect(remove.stdout).toContain("<client-id>\n\n  The credential's client id (svc_...).")
    expect(remove.stdout).toContain("Every command takes -h or --help")
    const services = await cli(["services", "create", "--help"])
    expect(services.stdout).toContain("$ service-auth services create [--auth-type oauth | none] [--name NAME]")
  }, CLI_TEST_DEADLINE_MS)

  it.skipIf(!HAS_SCRIPT)("on a terminal: colours unless NO_COLOR, lines wrapped to the terminal's width", async () => {
    const wide = await helpOnTerminal(SUBCOMMAND_HELP.join(" "), 120)
    expect(wide.code).toBe(0)
    expect(wide.output).toMatch(ANSI)
    expect(stripAnsi(wide.output)).toContain(
      "$ service-auth credentials remove [(-y, --yes)] [--url URL] [--json] <profile> <environment> <service-uuid> <client-id>\n"
    )
    // The terminal's width is used, not a fixed 80 columns.
    const wideLines = stripAnsi(wide.output).split("\n").map((line) => line.length)
    expect(Math.max(...wideLines)).toBeGreaterThan(80)
    expect(Math.max(...wideLines)).toBeLessThanOrEqual(120)
    const narrow = await helpOnTerminal("--help", 60)
    expect(narrow.output).toMatch(ANSI)
    expect(stripAnsi(narrow.output).split("\n").filter((line) => line.length > 60)).toEqual([])
    expect(stripAnsi(narrow.output)).toContain("  - credentials list [--expiring PERIOD] [--url URL]\n    [--json] [<profile>]")
    const plain = await helpOnTerminal(SUBCOMMAND_HELP.join(" "), 120, { NO_COLOR: "1" })
    expect(plain.code).toBe(0)
    expect(plain.output).not.toMatch(ANSI)
    expect(plain.output).toContain("$ service-auth credentials remove")
  }, CLI_TEST_DEADLINE_MS)
})
