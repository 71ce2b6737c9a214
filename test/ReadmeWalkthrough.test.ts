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

const walkThrough = (): string => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Walk-through with curl"))
  const block = /```sh\n([\s\S]*?)```/.exec(section)
  if (block === null) throw new Error("no sh block under '## Walk-through with curl' in README.md")
  return block[1]!
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

describe("README walk-through", () => {
  it("runs as written, and runs again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "service-auth-readme-"))
    dirs.push(dir)
    // As a newcomer runs it: no ADMIN_TOKEN, so the server generates one and the script reads it.
    const env = { PORT: String(await freePort()), DATA_DIR: join(dir, "data"), ADMIN_TOKEN: "", LOG_LEVEL: "warning" }
    for (const round of [1, 2]) {
      const { code, stderr, stdout } = await run(walkThrough(), env)
      expect(code, `round ${round}:\n${stdout}\n${stderr}`).toBe(0)
      const lines = stdout.trim().split("\n")
      const echoed = JSON.parse(lines.at(-1)!)
      expect(echoed).toMatchObject({ profile: "acme", environment: "production", body: { amount: 42 } })
      expect(echoed.client_id).toMatch(/^svc_[0-9a-f]{32}$/)
      expect(stdout).toContain("alg: 'RS256'") // the decoded header
      expect(stdout).toContain(`data: {`) // the decoded claims
      // A second run finds the first server answering and does not start another.
      if (round === 2) expect(stderr).not.toContain("could not start")
    }
  }, 120_000)
})
