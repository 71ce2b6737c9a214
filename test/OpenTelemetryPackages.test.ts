/**
 * Traces go through `@effect/opentelemetry`'s OTLP tracer; the OpenTelemetry SDK packages are only
 * its peers. The lock file installs one release of each, so no two copies of one package (with two
 * sets of globals) are ever loaded side by side, and the sources import none of them directly.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

const ROOT = join(import.meta.dirname, "..")

const sourcesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourcesUnder(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : []
  )

describe("OpenTelemetry packages", () => {
  it("the lock file installs one version of each", () => {
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
      readonly packages: Record<string, { readonly version?: string }>
    }
    const versions = new Map<string, Set<string>>()
    for (const [path, entry] of Object.entries(lock.packages)) {
      const name = /node_modules\/(@opentelemetry\/[^/]+)$/.exec(path)?.[1]
      if (name === undefined || entry.version === undefined) continue
      versions.set(name, (versions.get(name) ?? new Set()).add(entry.version))
    }
    expect(versions.size).toBeGreaterThan(0)
    const doubled = [...versions].filter(([, found]) => found.size > 1).map(([name, found]) => `${name}: ${[...found].join(", ")}`)
    expect(doubled).toEqual([])
  })

  it("no source imports an OpenTelemetry package but through @effect/opentelemetry", () => {
    const importing = sourcesUnder(join(ROOT, "src")).filter((file) => /from "@opentelemetry\//.test(readFileSync(file, "utf8")))
    expect(importing).toEqual([])
  })
})
