/**
 * The source layout a newcomer relies on: folders by feature, so that the tree is the architecture
 * (docs/architecture.md), with nothing loose at `src/` but the entry points, no source file over
 * 400 lines, no import cycle between modules (type-only imports and on-demand `import()` included:
 * a cycle is a cut in the wrong place either way), and the allowed imports between folders: the
 * decisions (`token/`, `service-call/`) know nothing of the server that carries them, `domain/`
 * knows no feature, the API contracts know no implementation, and `storage/` knows the features
 * only where it chooses their storage layers (and their storage interfaces as types).
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

/** Every file under a folder (the editor's assets too), as repository paths. */
const sourceFilesAndAssets = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sourceFilesAndAssets(path) : [relative(ROOT, path).split("\\").join("/")]
  })

/**
 * Each module's relative imports, as repository paths of `.ts` files; with `valuesOnly`, without
 * the type-only ones (`import type`, `export type`), which load nothing.
 */
const importGraph = (files: ReadonlyArray<string>, valuesOnly = false): Map<string, Array<string>> => {
  const graph = new Map<string, Array<string>>()
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8")
    const specifiers = [
      ...[...text.matchAll(/^(import|export)\s([^;]*?)\sfrom\s+"(\.[^"]+)"/gms)]
        .filter((match) => !valuesOnly || !/^type\s/.test(match[2]!))
        .map((match) => match[3]!),
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

/** The folder a source file belongs to: `token`, `service-call/proxy`, ... (`.` for src/ itself). */
const folderOf = (file: string): string => posix.dirname(file).replace(/^src\/?/, "") || "."

/** Each import that crosses from a folder matching `from` into a folder matching `to`. */
const crossings = (graph: Map<string, Array<string>>, from: (file: string) => boolean, to: (target: string) => boolean) =>
  [...graph].flatMap((
    [file, imports]
  ) => (from(file) ? imports.filter((target) => to(target)).map((target) => `${file} -> ${target}`) : []))

const inFolder = (...folders: ReadonlyArray<string>) => (file: string) =>
  folders.some((folder) => folderOf(file) === folder || folderOf(file).startsWith(`${folder}/`))

/** The folders by feature; a new one is a decision about the architecture, made here and in docs/architecture.md. */
const FOLDERS = [
  "admin",
  "catalogue",
  "cli",
  "config",
  "datadir",
  "domain",
  "federation",
  "keys",
  "observability",
  "server",
  "service-call",
  "service-call/proxy",
  "storage",
  "token",
  "transfer",
  "web",
  "web/admin",
  "web/admin/assets"
]
/** The folders that answer a request or act on the catalogue: what shared code must not know. */
const FEATURES = ["admin", "catalogue", "cli", "federation", "keys", "server", "service-call", "token", "transfer", "web"]
/** A feature's entries: the HttpApi handlers (`*Http.ts`) and the hot endpoints' executions (`*Execution.ts`). */
const isEntry = (file: string) => /(Http|Execution)\.ts$/.test(file)

describe("src/ layout", () => {
  const files = sourceFiles(SRC)
  const graph = importGraph(files)

  it("has nothing loose at src/ but the entry points", () => {
    const loose = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isFile())
    expect(loose.sort()).toEqual(["AppLayer.ts", "ServerMain.ts", "index.ts", "start.ts", "testing.ts"])
  })

  it("has the folders by feature and no other", () => {
    const folders = [...new Set(sourceFilesAndAssets(SRC).map(folderOf))].filter((folder) => folder !== ".").sort()
    expect(folders).toEqual([...FOLDERS].sort())
  })

  it("has no source file over 400 lines", () => {
    const long = files
      .map((file) => ({ file, lines: readFileSync(join(ROOT, file), "utf8").split("\n").length }))
      .filter(({ lines }) => lines > 400)
    expect(long).toEqual([])
  })

  it("has decisions that know nothing of HTTP servers: token/ and service-call/ import nothing from server/ but in their entries", () => {
    const decisions = (file: string) => inFolder("token", "service-call")(file) && !isEntry(file)
    expect(files.filter(decisions).length).toBeGreaterThan(10)
    expect(crossings(graph, decisions, inFolder("server"))).toEqual([])
  })

  it("has a proxy that knows nothing of the token endpoint or the server: service-call/proxy/ imports neither token/ nor server/", () => {
    expect(files.filter(inFolder("service-call/proxy")).length).toBeGreaterThan(0)
    expect(crossings(graph, inFolder("service-call/proxy"), inFolder("token", "server"))).toEqual([])
  })

  it("has a domain that knows no feature: domain/ imports only domain/", () => {
    expect(crossings(graph, inFolder("domain"), (target) => !inFolder("domain")(target))).toEqual([])
  })

  it("has a catalogue that knows none of the flows that use it: catalogue/ imports no token/, service-call/, admin/ or server/", () => {
    expect(crossings(graph, inFolder("catalogue"), inFolder("token", "service-call", "admin", "server"))).toEqual([])
  })

  it("has shared code that knows no feature: config/ and storage/ reach features only where they must", () => {
    // The storage layer choices (`storage/Storage.ts`) assemble each feature's storage layers and
    // the settings (`config/AppConfig.ts`) read each feature's settings; the rest of storage/ knows
    // a feature's storage interface as types only (the audit events of the catalogue's writes).
    const choosers = new Set(["src/storage/Storage.ts", "src/config/AppConfig.ts"])
    const shared = (file: string) => inFolder("storage", "config")(file) && !choosers.has(file)
    expect(crossings(importGraph(files, true), shared, inFolder(...FEATURES))).toEqual([])
  })

  it("has API contracts apart from their implementation: an *Api.ts imports only contracts and domain/", () => {
    const contracts = (file: string) => /Api\.ts$/.test(file) && file !== "src/server/ServedOpenApi.ts"
    const allowed = (target: string) => contracts(target) || inFolder("domain")(target) || target === "src/config/Version.ts"
    expect(files.filter(contracts).length).toBeGreaterThan(5)
    expect(crossings(graph, contracts, (target) => !allowed(target))).toEqual([])
  })

  it("has flows that depend on the narrow storage services, never on the whole CredentialRepo", () => {
    const flows = files.filter(inFolder("token", "service-call", "server", "admin", "transfer", "cli", "web"))
    const wide = flows.filter((file) =>
      /\bCredentialRepo\b(?!Shape)/.test(readFileSync(join(ROOT, file), "utf8").replace(/^\s*(\*|\/\/).*$/gm, "").replace(/"[^"\n]*"/g, ""))
    )
    expect(flows.length).toBeGreaterThan(0)
    expect(wide).toEqual([])
  })

  it("has a federation that knows nothing of the token endpoint: federation/ imports no token/ or service-call/, and server/ only in its entry", () => {
    expect(files.filter(inFolder("federation")).length).toBeGreaterThan(0)
    expect(crossings(graph, inFolder("federation"), inFolder("token", "service-call"))).toEqual([])
    expect(crossings(graph, (file) => inFolder("federation")(file) && !isEntry(file), inFolder("server"))).toEqual([])
  })

  it("has no import cycle", () => {
    // The check itself sees imports: a module that imports nothing relative would make it vacuous.
    expect([...graph.values()].some((imports) => imports.length > 0)).toBe(true)
    expect(cycles(graph)).toEqual([])
  })
})

/** What a file that starts processes imports (written so that this file does not match itself). */
const importsOf = (modules: ReadonlyArray<string>) => new RegExp(modules.map((module) => `from "${module}`).join("|"))
/** The support modules that start processes themselves (a run's harness over ServerProcess, say). */
const SUPPORT = join(ROOT, "test", "support")
const STARTING_SUPPORT = readdirSync(SUPPORT)
  .filter((name) => name.endsWith(".ts"))
  .filter((name) => importsOf(["node:child_process", "./ServerProcess", "./CliProcess"]).test(readFileSync(join(SUPPORT, name), "utf8")))
  .map((name) => `./support/${name.replace(/\.ts$/, "")}`)
const STARTS_PROCESSES = importsOf(["node:child_process", "./support/ServerProcess", "./support/CliProcess", ...STARTING_SUPPORT])

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
