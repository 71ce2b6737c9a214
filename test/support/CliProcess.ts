/**
 * The admin CLI as an operator runs it, for the CLI's test files: the built `dist/cli.mjs` (the
 * package's bin) in a child process, against one real server a file (PostgreSQL at
 * TEST_DATABASE_URL when set, otherwise the embedded database in a temporary data directory),
 * started by `useCliServer()`. Exit codes, stdout and stderr are returned as a script would read them.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, expect } from "vitest"
import { TEST_DATABASE_URL } from "./Databases.js"
import { type ServerProcess, startServer } from "./ServerProcess.js"

export const ROOT = fileURLToPath(new URL("../../", import.meta.url))
export const CLI = join(ROOT, "dist", "cli.mjs")
export const ADMIN_TOKEN = "cli-test-admin-token"
/** script(1) (util-linux) gives the prompt test a pseudo-terminal. */
export const HAS_SCRIPT = spawnSync("script", ["--version"], { stdio: "ignore" }).status === 0

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The file's server, once `useCliServer()`'s hook has started it. */
export let server: ServerProcess
let dataDir: string | undefined

/** `service-auth ...` with stdin not a terminal (closed, or piped `input`), as in a script or CI. */
export const cli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = {}, input?: string) =>
  new Promise<Run>((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, ADMIN_TOKEN, SERVICE_AUTH_URL: server?.base, ...env },
      stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"]
    })
    if (input !== undefined) child.stdin?.end(input)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    // A command that waits for input it cannot get would hang the test: fail it instead.
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

/** A command that must succeed; its stdout parsed as the one JSON document it printed. */
export const cliJson = async (args: ReadonlyArray<string>): Promise<any> => {
  const run = await cli([...args, "--json"])
  expect(run.code, run.stderr).toBe(0)
  return JSON.parse(run.stdout)
}

export const tokenRequest = (fields: Record<string, string>) =>
  fetch(`${server.base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...fields })
  })

export const uniqueProfile = () => `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

/**
 * A test's deadline: each runs ten to twenty CLI processes (a node start each, a few seconds apiece
 * when both cores are busy) against the server. A deadline for a hang, not a speed limit.
 */
export const CLI_TEST_DEADLINE_MS = 480_000

/** Starts the file's server before its tests and stops it after them. */
export const useCliServer = () => {
  beforeAll(async () => {
    const storage: Record<string, string> = TEST_DATABASE_URL === undefined
      ? { DATA_DIR: join(dataDir = mkdtempSync(join(tmpdir(), "service-auth-cli-")), "data") }
      : { DATABASE_URL: TEST_DATABASE_URL }
    // A fresh embedded database runs initdb first: seconds alone, over a minute on a loaded machine.
    server = await startServer({ ADMIN_TOKEN, ...storage }, { healthTimeoutMs: 170_000 })
  }, 180_000)

  afterAll(async () => {
    await server?.stop()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  })
}
