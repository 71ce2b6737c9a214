/**
 * `npm run bench` runs its scripts under tsx, outside vitest: nothing they import, however
 * indirectly, may import vitest (which throws when loaded outside its runner). A helper of the test
 * suite once pulled it in and stopped the bench before it measured anything.
 */
import { describe, expect, it } from "vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const IMPORT = /^\s*(?:import|export)\s[^"']*?from\s+["']([^"']+)["']|^\s*import\s+["']([^"']+)["']/gm

/** The repository's own modules `file` imports, and the packages it names. */
const importsOf = (file: string) => {
  const text = readFileSync(file, "utf8")
  const local: Array<string> = []
  const packages: Array<string> = []
  for (const match of text.matchAll(IMPORT)) {
    const specifier = match[1] ?? match[2]!
    if (!specifier.startsWith(".")) {
      packages.push(specifier)
      continue
    }
    const target = resolve(dirname(file), specifier.replace(/\.js$/, ".ts"))
    const found = [target, target.replace(/\.ts$/, ".mjs"), resolve(dirname(file), specifier)].find(existsSync)
    if (found !== undefined) local.push(found)
  }
  return { local, packages }
}

describe("npm run bench", () => {
  it("imports nothing that loads vitest", () => {
    const scripts = readdirSync(join(ROOT, "bench")).filter((name) => /\.(ts|mjs)$/.test(name)).map((name) => join(ROOT, "bench", name))
    const seen = new Set<string>()
    const offenders: Array<string> = []
    const visit = (file: string, path: ReadonlyArray<string>) => {
      if (seen.has(file)) return
      seen.add(file)
      const { local, packages } = importsOf(file)
      if (packages.some((name) => name === "vitest" || name.startsWith("@effect/vitest"))) {
        offenders.push([...path, file].map((f) => f.slice(ROOT.length + 1)).join(" -> "))
      }
      for (const next of local) visit(next, [...path, file])
    }
    for (const script of scripts) visit(script, [])
    expect(seen.size).toBeGreaterThan(scripts.length)
    expect(offenders).toEqual([])
  })
})
