/**
 * What `npm start` parses before it can answer (the globalSetup has built dist/): the entry is a
 * few lines that start compiling PGlite's WebAssembly and then import the server; the server's
 * static graph holds neither undici nor ws (the platform's HTTP client and WebSocket server, never
 * used by the server, are loaded only on first use), and PGlite is imported only when an embedded
 * database is opened.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const DIST = fileURLToPath(new URL("../dist/", import.meta.url))

/** The files a module loads before it runs: itself and its static imports, transitively. */
const staticGraph = (file: string, seen = new Set<string>()): Set<string> => {
  if (seen.has(file)) return seen
  seen.add(file)
  const text = readFileSync(join(DIST, file), "utf8")
  for (const [, imported] of text.matchAll(/(?:^|\n)(?:import|export)\s[^;]*?from\s*"\.\/([^"]+)"/g)) staticGraph(imported!, seen)
  for (const [, imported] of text.matchAll(/(?:^|\n)import\s*"\.\/([^"]+)"/g)) staticGraph(imported!, seen)
  return seen
}

describe("the server bundle", () => {
  it("starts from a small entry that imports the server dynamically", () => {
    const entry = readFileSync(join(DIST, "service-auth.mjs"), "utf8")
    expect(entry.length).toBeLessThan(16_000)
    expect(entry).toMatch(/import\("\.\/ServerMain-[^"]+\.mjs"\)/)
  })

  it("loads no undici, ws or PGlite before the server runs", () => {
    const main = /import\("\.\/(ServerMain-[^"]+\.mjs)"\)/.exec(readFileSync(join(DIST, "service-auth.mjs"), "utf8"))![1]!
    // ServerMain.ts opens the early port, then imports the server's layers (AppLayer, a chunk).
    const server = /import\("\.\/(AppLayer-[^"]+\.mjs)"\)/.exec(readFileSync(join(DIST, main), "utf8"))![1]!
    const files = [...staticGraph("service-auth.mjs"), ...staticGraph(main), ...staticGraph(server)]
    const text = files.map((file) => readFileSync(join(DIST, file), "utf8")).join("\n")
    // Module comments name the path esbuild saw: node_modules/ here, or a symlinked one's target.
    const packageComment = (name: string) => new RegExp(`// \\S*node_modules/${name}/`)
    expect(text).toMatch(packageComment("effect")) // the graph was followed
    expect(text).not.toMatch(packageComment("undici"))
    expect(text).not.toMatch(packageComment("ws"))
    expect(text).not.toMatch(/from\s*"@electric-sql\/pglite"/)
    expect(text).toContain(`import("@electric-sql/pglite")`)
  })
})
