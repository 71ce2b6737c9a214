/**
 * What `npm start` prints, as a newcomer reads it: npm's echo of a short command (the flags live in
 * `scripts/start.sh`, explained there), nothing of the script's own, then the server's ready line,
 * which names the editor (`/admin`, with where its admin token is) and the API reference (`/docs`).
 * On PostgreSQL without ISSUER, a warning that each instance names its own issuer; a DATABASE_URL
 * of another database names its scheme.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, runToExit, startServer } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL

const dirs: Array<string> = []
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-lines-"))
  dirs.push(dir)
  return dir
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The log's lines once the ready line is in it (it follows /readyz by a moment). */
const linesUntilReady = async (log: () => string) => {
  for (let waited = 0; waited < 10_000 && !log().includes("listening on"); waited += 100) await sleep(100)
  return log().split("\n").filter((line) => line.trim() !== "")
}

describe("npm start's own lines", () => {
  it("package.json's start is one short command; the script explains its flags", () => {
    const start = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.start as string
    expect(start).toBe("exec sh scripts/start.sh")
    const script = readFileSync(join(ROOT, "scripts/start.sh"), "utf8")
    for (const flag of ["--max-semi-space-size", "--heap-growing-percent", "MALLOC_MMAP_THRESHOLD_", "exec node", "--if-stale"]) {
      expect(script).toContain(flag)
    }
    // Each setting is preceded by a comment saying why.
    expect(script.match(/^# /gm)?.length).toBeGreaterThanOrEqual(10)
    // It prints nothing of its own.
    expect(script).not.toMatch(/^\s*(echo|printf)\b/m)
  })

  it("npm start (not silent) prints npm's short echo, the token line, then the ready line naming /admin and /docs", async () => {
    const dataDir = join(freshDir(), "data")
    const port = await freePort()
    const child = spawn("npm", ["start"], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), HOST: "0.0.0.0", LOG_LEVEL: "info", DATA_DIR: dataDir, ADMIN_TOKEN: "" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let log = ""
    child.stdout!.on("data", (chunk: Buffer) => (log += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (log += chunk.toString()))
    const exited = new Promise((resolve) => child.once("close", resolve))
    try {
      for (let waited = 0; waited < 120_000 && !log.includes("listening on"); waited += 200) await sleep(200)
      const lines = log.split("\n").filter((line) => line.trim() !== "")
      const ready = lines.findIndex((line) => line.includes("listening on"))
      expect(ready, log).toBeGreaterThan(0)
      // Before the ready line: npm's echo of the command and the admin token's location, nothing else.
      expect(lines.slice(0, ready).filter((line) => !line.includes("ADMIN_TOKEN is not set")), log).toEqual([
        expect.stringMatching(/^> service-auth@[\d.]+ start$/),
        "> exec sh scripts/start.sh"
      ])
      expect(lines[ready]).toContain(`service-auth listening on http://0.0.0.0:${port}`)
      expect(lines[ready]).toContain(`editor: http://localhost:${port}/admin (paste the admin token from ${dataDir}/admin-token)`)
      expect(lines[ready]).toContain(`API reference: http://localhost:${port}/docs`)
      expect(lines[ready]).not.toContain(readFileSync(join(dataDir, "admin-token"), "utf8").trim())
    } finally {
      process.kill(-child.pid!, "SIGTERM")
      await exited
    }
  }, 150_000)

  it("with ADMIN_TOKEN set, the ready line says to paste it", async () => {
    const server = await startServer({
      ADMIN_TOKEN: "start-lines-admin-token-0123456789",
      LOG_LEVEL: "info",
      DATA_DIR: join(freshDir(), "data")
    })
    try {
      const lines = await linesUntilReady(server.log)
      const ready = lines.find((line) => line.includes("listening on"))
      expect(ready).toContain(`editor: http://127.0.0.1:${server.port}/admin (paste the ADMIN_TOKEN you set)`)
      expect(ready).toContain(`API reference: http://127.0.0.1:${server.port}/docs`)
      expect(server.log()).not.toContain("ISSUER is not set")
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, 150_000)

  it.runIf(DATABASE_URL !== undefined)("on PostgreSQL without ISSUER, a warning that each instance names its own issuer", async () => {
    const server = await startServer({ ADMIN_TOKEN: "start-lines-admin-token-0123456789", DATABASE_URL: DATABASE_URL!, ISSUER: "" })
    try {
      const lines = await linesUntilReady(server.log)
      const warning = lines.find((line) => line.includes("ISSUER is not set"))
      expect(warning, server.log()).toContain(`this instance's issuer is http://localhost:${server.port}`)
      expect(warning).toContain("set ISSUER to the URL clients use")
    } finally {
      expect(await server.stop()).toBe(0)
    }
    const named = await startServer({
      ADMIN_TOKEN: "start-lines-admin-token-0123456789",
      DATABASE_URL: DATABASE_URL!,
      ISSUER: "http://auth.example"
    })
    try {
      await linesUntilReady(named.log)
      expect(named.log()).not.toContain("ISSUER is not set")
    } finally {
      expect(await named.stop()).toBe(0)
    }
  }, 150_000)

  it("a DATABASE_URL of another database names its scheme, in one line", async () => {
    for (const [url, scheme] of [["mysql://x", "mysql"], ["sqlite:///tmp/x.db", "sqlite"]] as const) {
      const result = await runToExit({
        PORT: String(await freePort()),
        ADMIN_TOKEN: "start-lines-admin-token-0123456789",
        DATABASE_URL: url
      })
      const lines = result.output.split("\n").filter((line) => line.trim() !== "")
      expect(result.code, result.output).toBe(1)
      expect(lines).toEqual([
        `service-auth could not start: invalid setting: DATABASE_URL names a ${scheme}: database; it must be a PostgreSQL URL, ` +
        "postgres://user@host:port/database (or postgresql://), or be unset for the embedded database"
      ])
    }
  }, 120_000)
})
