/**
 * The README's walk-through works when pasted as written: the test takes its shell block as it
 * stands in README.md and runs it with bash, twice, against the real server it starts itself.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freePort } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))

const README = () => readFileSync(join(ROOT, "README.md"), "utf8")

/** Every `sh` block of the README, in order, with the heading it stands under. */
const shBlocks = (): Array<{ readonly heading: string; readonly code: string }> => {
  const blocks: Array<{ heading: string; code: string }> = []
  let heading = ""
  const lines = README().split("\n")
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!
    if (/^#{2,3} /.test(line)) heading = line.replace(/^#+ /, "")
    if (line !== "```sh") continue
    const end = lines.indexOf("```", index + 1)
    blocks.push({ heading, code: lines.slice(index + 1, end).join("\n") })
    index = end
  }
  return blocks
}

/** The block under `heading`: one a newcomer runs in the walk-through's shell. */
const blockUnder = (heading: string): string => {
  const block = shBlocks().find((b) => b.heading === heading)
  if (block === undefined) throw new Error(`no sh block under '${heading}' in README.md`)
  return block.code
}

const walkThrough = () => blockUnder("Walk-through with curl")
/** What follows the walk-through in the same shell, in the README's order. */
const continued = () => [blockUnder("Scoped admin tokens"), blockUnder("Revocation, introspection, resource indicators")]

/** The settings the configuration table (docs/operators.md) documents: a reader may have exported them. */
const documentedSettings = (): Set<string> => {
  const page = readFileSync(join(ROOT, "docs/operators.md"), "utf8")
  return new Set([...page.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]!))
}

/**
 * The shell variables each block uses before any block up to it defines them (`NAME=`, `export
 * NAME=`, `for NAME in`, `read NAME`), leaving out single-quoted text (node and JSON) and what the
 * shell or the configuration table provides.
 */
export const variablesUsedBeforeDefined = (blocks: ReadonlyArray<{ heading: string; code: string }>, known: Set<string>) => {
  const defined = new Set([...known, "PWD", "HOME", "RANDOM", "PATH"])
  const problems: Array<string> = []
  for (const { code, heading } of blocks) {
    // Single-quoted text may span lines (a node script): the shell expands nothing in it.
    for (const line of code.replace(/'[^']*'/g, "''").split("\n")) {
      // Each command of a line in turn: `A=1; echo $A` defines A before it is used.
      for (const shell of line.replace(/(^|\s)#.*$/, "").split(/;|&&|\|\|/)) {
        for (const use of shell.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)) {
          if (!defined.has(use[1]!)) problems.push(`${heading}: $${use[1]} in: ${line.trim()}`)
        }
        definitions(shell).forEach((name) => defined.add(name))
      }
    }
  }
  return problems
}

/** The names a command defines: `NAME=`, `export NAME[=…] …`, `for NAME in`, `read NAME`. */
const definitions = (shell: string): Array<string> => {
  const names: Array<string> = []
  for (const assignment of shell.matchAll(/(?:^|[\s(])(?:for\s+|read\s+)?([A-Za-z_][A-Za-z0-9_]*)(?:=|\s+in\b)/g)) {
    names.push(assignment[1]!)
  }
  for (const exported of shell.matchAll(/\bexport\s+((?:[A-Za-z_][A-Za-z0-9_]*(?:=\S*)?\s*)+)/g)) {
    for (const name of exported[1]!.split(/\s+/)) if (name !== "") names.push(name.split("=")[0]!)
  }
  return names
}

const groups: Array<number> = []
const dirs: Array<string> = []
afterAll(() => {
  // The first run's `npm start &` is still serving: stop its whole process group.
  for (const group of groups) {
    try {
      process.kill(-group, "SIGTERM")
    } catch {
      /* gone */
    }
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const run = (script: string, env: Record<string, string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("bash", ["-e", "-c", script], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    groups.push(child.pid!)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    // Resolve when bash itself exits; the server it started in the background keeps the pipes open.
    child.once("exit", (code) => setTimeout(() => resolve({ code, stdout, stderr }), 100))
  })

describe("README's shell blocks", () => {
  it("use no variable before the README defines it (in the order a newcomer runs them)", () => {
    expect(variablesUsedBeforeDefined(shBlocks(), documentedSettings())).toEqual([])
  })

  it("the check catches a variable used before it is defined", () => {
    const blocks = [
      { heading: "first", code: "B=http://localhost:3000\ncurl $B/x -H \"$A\"  # $C in a comment\nnode -e 'console.log(`${x}`)'" },
      { heading: "second", code: "A=1; echo $A ${B} $PORT $LATER\nLATER=2" }
    ]
    expect(variablesUsedBeforeDefined(blocks, new Set(["PORT"]))).toEqual([
      `first: $A in: curl $B/x -H "$A"  # $C in a comment`,
      "second: $LATER in: A=1; echo $A ${B} $PORT $LATER"
    ])
  })
})

describe("README walk-through", () => {
  it("runs as written, and runs again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "service-auth-readme-"))
    dirs.push(dir)
    // As a newcomer runs it: no ADMIN_TOKEN, so the server generates one and the script reads it.
    const env = { PORT: String(await freePort()), DATA_DIR: join(dir, "data"), ADMIN_TOKEN: "", LOG_LEVEL: "warning" }
    // The walk-through, then the sections that continue in its shell, with unset variables an error.
    const script = ["set -u -o pipefail", walkThrough(), ...continued()].join("\n")
    for (const round of [1, 2]) {
      const { code, stderr, stdout } = await run(script, env)
      expect(code, `round ${round}:\n${stdout}\n${stderr}`).toBe(0)
      const lines = stdout.trim().split("\n")
      const echoed = JSON.parse(lines.find((line) => line.includes("\"body\":{\"amount\":42}"))!)
      expect(echoed).toMatchObject({ profile: "acme", environment: "production", body: { amount: 42 } })
      expect(echoed.client_id).toMatch(/^svc_[0-9a-f]{32}$/)
      expect(stdout).toContain("alg: 'RS256'") // the decoded header
      expect(stdout).toContain(`data: {`) // the decoded claims
      // The sections that follow: a scoped token made, listed and revoked; introspection before and
      // after the revocation; a token for the service named by its URL.
      expect(stdout).toContain(`"name":"acme-team","role":"owner","profiles":["acme"]`)
      const introspected = lines.filter((line) => line.startsWith(`{"active"`)).map((line) => JSON.parse(line))
      expect(introspected).toEqual([expect.objectContaining({ active: true, client_id: echoed.client_id }), { active: false }])
      expect(lines).toContain("200")
      expect(JSON.parse(lines.at(-1)!)).toMatchObject({ token_type: "Bearer", expires_in: 3600 })
      expect(stderr).not.toMatch(/unbound variable|SyntaxError|Unexpected end of JSON/)
      // A second run finds the first server answering and does not start another.
      if (round === 2) expect(stderr).not.toContain("could not start")
    }
  }, 120_000)
})
