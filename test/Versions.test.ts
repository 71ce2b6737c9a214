/**
 * One version everywhere, package.json's: the server's and the CLI's `--version`, the OpenAPI
 * document's `info.version` (what `/healthz` answers is checked where it is served: EarlyPort and
 * HostileInput). The server's other arguments are refused, since it is configured by its
 * environment alone.
 */
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import YAML from "yaml"
import { SERVICE_VERSION } from "../src/config/Version.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const run = promisify(execFile)
const packageVersion: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version

describe("the version", () => {
  it("is package.json's, a semantic version", () => {
    expect(SERVICE_VERSION).toBe(packageVersion)
    expect(SERVICE_VERSION).toMatch(/^\d+\.\d+\.\d+$/)
  })

  it("is the OpenAPI document's info.version", () => {
    expect(YAML.parse(readFileSync(join(ROOT, "openapi.yaml"), "utf8")).info.version).toBe(packageVersion)
  })

  it("the server prints it with --version and exits 0, before reading any configuration", async () => {
    const { stdout } = await run(process.execPath, [join(ROOT, "dist/service-auth.mjs"), "--version"], {
      env: { ...process.env, PORT: "not a port" }
    })
    expect(stdout).toBe(`${packageVersion}\n`)
  }, 30_000)

  it("the server refuses any other argument, exit 2, naming it", async () => {
    const failed = await run(process.execPath, [join(ROOT, "dist/service-auth.mjs"), "--port=80"]).then(
      () => undefined,
      (error: { code?: number; stderr?: string }) => error
    )
    expect(failed?.code).toBe(2)
    expect(failed?.stderr).toContain("\"--port=80\"")
  }, 30_000)

  it("service-auth --version prints it", async () => {
    const { stdout } = await run(process.execPath, [join(ROOT, "dist/cli.mjs"), "--version"])
    expect(stdout.trim()).toBe(packageVersion)
  }, 30_000)
})
