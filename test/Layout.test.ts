/**
 * The source layout a newcomer relies on: folders by concern with nothing loose at `src/` but the
 * entry points, no source file over 400 lines, no import cycle between modules (type-only imports
 * and on-demand `import()` included: a cycle is a cut in the wrong place either way), and decisions
 * (`auth/`, `gateway/`) that import nothing from `http/`, which maps their outcomes to answers.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, posix, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { PROCESS_FILES } from "../vitest.config.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const SRC = join(ROOT, "src")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [relative(ROOT, path).split("\\").join("/")] : []
  })

/** Each module's relative imports, as repository paths of `.ts` files. */
const importGraph = (files: ReadonlyArray<string>): Map<string, Array<string>> => {
  const graph = new Map<string, Array<string>>()
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8")
    const specifiers = [
      ...[...text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"(\.[^"]+)"/gms)].map((match) => match[1]!),
      ...[...text.matchAll(/import\(\s*"(\.[^"]+)"\s*\)/g)].map((match) => match[1]!)
    ]
    graph.set(
      file,
      specifiers.map((specifier) => posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, ".ts"))
    )
  }
  return graph
}

const cycles = (graph: Map<string, Array<string>>): Array<string> => {
  const found: Array<string> = []
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const visit = (file: string) => {
    state.set(file, "open")
    stack.push(file)
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next].join(" -> "))
      else if (state.get(next) === undefined) visit(next)
    }
    stack.pop()
    state.set(file, "done")
  }
  for (const file of graph.keys()) if (state.get(file) === undefined) visit(file)
  return found
}

describe("src/ layout", () => {
  const files = sourceFiles(SRC)

  it("has nothing loose at src/ but the entry points", () => {
    const loose = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isFile())
    expect(loose.sort()).toEqual(["AppLayer.ts", "index.ts", "main.ts", "start.ts", "testing.ts"])
  })

  it("has no source file over 400 lines", () => {
    const long = files
      .map((file) => ({ file, lines: readFileSync(join(ROOT, file), "utf8").split("\n").length }))
      .filter(({ lines }) => lines > 400)
    expect(long).toEqual([])
  })

  it("has decisions that know nothing of HTTP servers: auth/ and gateway/ import nothing from http/", () => {
    const graph = importGraph(files)
    const crossing = [...graph].flatMap(([file, imports]) =>
      /^src\/(auth|gateway)\//.test(file) ? imports.filter((target) => target.startsWith("src/http/")).map((target) => `${file} -> ${target}`) : []
    )
    expect([...graph.keys()].filter((file) => file.startsWith("src/gateway/")).length).toBeGreaterThan(0)
    expect(crossing).toEqual([])
  })

  it("has flows that depend on the narrow storage services, never on the whole CredentialRepo", () => {
    const flows = files.filter((file) => /^src\/(auth|gateway|http|api|admin-auth|transfer|cli)\//.test(file))
    const wide = flows.filter((file) => /\bCredentialRepo\b(?!Shape)/.test(readFileSync(join(ROOT, file), "utf8").replace(/^\s*(\*|\/\/).*$/gm, "").replace(/"[^"\n]*"/g, "")))
    expect(flows.length).toBeGreaterThan(0)
    expect(wide).toEqual([])
  })

  it("has no import cycle", () => {
    const graph = importGraph(files)
    // The check itself sees imports: a module that imports nothing relative would make it vacuous.
    expect([...graph.values()].some((imports) => imports.length > 0)).toBe(true)
    expect(cycles(graph)).toEqual([])
  })
})

/** What a file that starts processes imports (written so that this file does not match itself). */
const STARTS_PROCESSES = new RegExp(["node:child_process", "./support/ServerProcess", "./support/CliProcess"].map((module) => `from "${module}`).join("|"))

describe("test/ layout", () => {
  it("lists every file that starts servers or CLIs among the process files (vitest.config.ts)", () => {
    const TEST = join(ROOT, "test")
    const starting = readdirSync(TEST)
      .filter((name) => name.endsWith(".test.ts"))
      .filter((name) => STARTS_PROCESSES.test(readFileSync(join(TEST, name), "utf8")))
    expect(starting.length).toBeGreaterThan(0)
    expect(starting.filter((name) => !PROCESS_FILES.includes(name))).toEqual([])
  })
})
