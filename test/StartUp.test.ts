/**
 * Start-up of the real server as `npm start` runs it: the compiled bundle under npm, no TypeScript
 * loader anywhere in its process tree; no connection accepted and left unanswered while it starts;
 * and every start-up failure is one clear line and a non-zero exit, promptly.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, runToExit as runServerToExit, startServer } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const ADMIN_TOKEN = "start-up-admin-token"
const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL

const dirs: Array<string> = []
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-start-"))
  dirs.push(dir)
  return dir
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * A start that cannot succeed exits by itself within this: the server gives up after at most 1.5 s
 * (PostgreSQL's connection timeout), the rest is a wide margin for npm and node to start on a busy
 * machine. A server that retried or hung would be killed at the deadline, and fail.
 */
const FAILS_WITHIN_MS = 30_000

/** `npm start` with the given settings, run to its exit (or killed at the deadline). */
const runToExit = (env: Record<string, string>, deadlineMs = FAILS_WITHIN_MS + 5_000) =>
  runServerToExit({ ADMIN_TOKEN, ...env }, deadlineMs)

/**
 * One GET /healthz on a fresh connection: refused, answered (with the status), or hung: no answer
 * within 10 s. The early port answers at once, but the start opens PGlite on the main thread (about
 * 0.4 s of WebAssembly in one piece, quiet); under CI's load, with Node 24 too, such a piece once
 * held a probe past the 3 s this used to allow. A connection accepted and held until the start is
 * over (no early port) or never answered still fails here whenever the start takes longer.
 */
const probe = async (port: number): Promise<"refused" | "hung" | number> => {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) })
    return response.status
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause
    if (cause?.code === "ECONNREFUSED") return "refused"
    if ((error as Error).name === "TimeoutError") return "hung"
    throw error
  }
}

/** Every process below `pid`, with its command line. */
const processTree = (pid: number): Array<{ readonly pid: number; readonly cmdline: string }> => {
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
  return [{ pid, cmdline }, ...children.flatMap((child) => processTree(Number(child)))]
}

describe("start-up", () => {
  it("no probe of /healthz is ever left unanswered while a fresh data directory starts; then it serves at once", async () => {
    const port = await freePort()
    const dataDir = join(freshDir(), "data")
    const child = spawn("npm", ["start", "--silent"], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, ADMIN_TOKEN, LOG_LEVEL: "warning" },
      stdio: "ignore",
      detached: true
    })
    try {
      const started = Date.now()
      const outcomes: Array<"refused" | "hung" | number> = []
      while (Date.now() - started < 60_000) {
        const outcome = await probe(port)
        outcomes.push(outcome)
        if (outcome !== "refused") break
        await sleep(20)
      }
      console.info(`fresh data directory: /healthz answered ${Date.now() - started} ms after npm start`)
      expect(outcomes.filter((o) => o !== "refused")).toEqual([200])
      // Ready means ready: the admin API and the database behind it answer on the first try.
      const profile = await fetch(`http://127.0.0.1:${port}/admin/profiles/acme`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
      })
      expect(profile.status).toBe(201)
    } finally {
      process.kill(-child.pid!, "SIGTERM")
      await new Promise((resolve) => child.once("exit", resolve))
    }
  }, 90_000)

  it("npm start runs the compiled bundle: node dist/service-auth.mjs under npm, no TypeScript loader in the tree", async () => {
    const server = await startServer({ ADMIN_TOKEN, DATA_DIR: join(freshDir(), "data") })
    try {
      const tree = processTree(server.child.pid!)
      const below = tree.slice(1)
      expect(below.map((p) => p.cmdline)).toEqual([`node --max-semi-space-size=8 --heap-growing-percent=20 dist/service-auth.mjs`])
      for (const { cmdline } of tree) expect(cmdline).not.toMatch(/tsx|ts-node|esbuild|--loader|--import|--require|--experimental/)
      // Nothing of a loader is mapped into the server process either.
      const maps = readFileSync(`/proc/${server.serverPid()}/maps`, "utf8")
      expect(maps).not.toMatch(/esbuild|tsx/)
      // glibc's mmap threshold is fixed (scripts/start.sh), unless the environment sets one.
      const environment = readFileSync(`/proc/${server.serverPid()}/environ`, "utf8").split("\0")
      expect(environment).toContain(`MALLOC_MMAP_THRESHOLD_=${process.env.MALLOC_MMAP_THRESHOLD_ ?? "131072"}`)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, 120_000)

  it("npm start gives a server that exports traces 64 MB semi-spaces and V8's own old-generation growth", async () => {
    // Nothing listens at the collector: the exporter warns once and the server runs on.
    const collector = `http://127.0.0.1:${await freePort()}`
    for (const variable of ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]) {
      const server = await startServer({ ADMIN_TOKEN, DATA_DIR: join(freshDir(), "data"), [variable]: collector })
      try {
        const below = processTree(server.child.pid!).slice(1)
        expect(below.map((p) => p.cmdline), variable).toEqual([`node --max-semi-space-size=64 dist/service-auth.mjs`])
      } finally {
        expect(await server.stop()).toBe(0)
      }
    }
  }, 120_000)
})

describe("start-up failures: one clear line, a non-zero exit, promptly", () => {
  const expectOneLine = (result: { code: number | null; output: string; ms: number }, pattern: RegExp) => {
    expect(result.code, result.output).not.toBe(0)
    expect(result.code, result.output).not.toBeNull()
    const lines = result.output.split("\n").filter((line) => line.trim() !== "")
    expect(lines, result.output).toHaveLength(1)
    expect(lines[0]).toMatch(/^service-auth could not start: /)
    expect(lines[0]).toMatch(pattern)
    expect(result.output).not.toMatch(/\n\s+at /)
    console.info(`${lines[0]} (${result.ms} ms)`)
  }

  it("the port is in use, even on a fresh data directory (reported before the database is created)", async () => {
    const blocker = createServer()
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as { port: number }).port))
    )
    try {
      const result = await runToExit({ PORT: String(port), DATA_DIR: join(freshDir(), "data") })
      expectOneLine(result, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`))
      expect(result.ms).toBeLessThan(FAILS_WITHIN_MS)
    } finally {
      blocker.close()
    }
  }, 60_000)

  const cases: ReadonlyArray<readonly [string, () => Record<string, string>, RegExp]> = [
    [
      "PostgreSQL refuses connections",
      () => ({ DATABASE_URL: "postgres://postgres@127.0.0.1:1/service_auth" }),
      /PostgreSQL at 127\.0\.0\.1:1\/service_auth: connection refused/
    ],
    [
      "the database host does not exist",
      () => ({ DATABASE_URL: "postgres://postgres:hunter2@no-such-host.invalid:5432/x" }),
      /PostgreSQL at no-such-host\.invalid:5432\/x: host not found/
    ],
    [
      "the signing key file is missing",
      () => ({ DATA_DIR: join(freshDir(), "data"), SIGNING_KEY_FILE: "/no/such/key.pem" }),
      /cannot read SIGNING_KEY_FILE \/no\/such\/key\.pem: no such file or directory/
    ],
    ["the signing key file is not a key", () => {
      const file = join(freshDir(), "key.pem")
      writeFileSync(file, "not a key\n")
      return { DATA_DIR: join(freshDir(), "data"), SIGNING_KEY_FILE: file }
    }, /SIGNING_KEY_FILE .*key\.pem is not a usable signing key/],
    [
      "LOG_LEVEL is not a level",
      () => ({ LOG_LEVEL: "loud", DATA_DIR: join(freshDir(), "data") }),
      /invalid setting: LOG_LEVEL must be one of trace, debug, info, warning, error, none/
    ],
    [
      "LOG_FORMAT is not a format",
      () => ({ LOG_FORMAT: "xml", DATA_DIR: join(freshDir(), "data") }),
      /invalid setting: LOG_FORMAT must be text or json/
    ],
    ["PORT is not a port", () => ({ PORT: "http", DATA_DIR: join(freshDir(), "data") }), /invalid setting: PORT/],
    [
      "MAX_BODY_BYTES is not positive",
      () => ({ MAX_BODY_BYTES: "0", DATA_DIR: join(freshDir(), "data") }),
      /invalid setting: MAX_BODY_BYTES must be a positive integer/
    ],
    [
      "DATA_DIR cannot be created",
      () => ({ DATA_DIR: "/etc/hostname/data" }),
      /cannot use DATA_DIR \/etc\/hostname\/data: a part of the path is not a directory/
    ],
    [
      "HOST is not a local address",
      () => ({ HOST: "192.0.2.1", DATA_DIR: join(freshDir(), "data") }),
      /cannot listen on 192\.0\.2\.1: no such local address/
    ]
  ]
  for (const [label, env, pattern] of cases) {
    it(label, async () => {
      const result = await runToExit({ PORT: String(await freePort()), ...env() })
      expectOneLine(result, pattern)
      expect(result.output).not.toContain("hunter2")
      expect(result.ms).toBeLessThan(FAILS_WITHIN_MS)
    }, 60_000)
  }

  it("PostgreSQL accepts the connection and never answers", async () => {
    const silent = createServer(() => {}) // accepts, says nothing
    const port = await new Promise<number>((resolve) =>
      silent.listen(0, "127.0.0.1", () => resolve((silent.address() as { port: number }).port))
    )
    try {
      const result = await runToExit({ PORT: String(await freePort()), DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x` })
      expectOneLine(result, new RegExp(`PostgreSQL at 127\\.0\\.0\\.1:${port}/x: no answer within 1\\.5 s`))
      expect(result.ms).toBeLessThan(FAILS_WITHIN_MS)
    } finally {
      silent.close()
    }
  }, 60_000)

  it.runIf(DATABASE_URL !== undefined)("the database does not exist", async () => {
    const url = new URL(DATABASE_URL!)
    url.pathname = "/service_auth_no_such_database"
    const result = await runToExit({ PORT: String(await freePort()), DATABASE_URL: url.toString() })
    expectOneLine(result, /service_auth_no_such_database: the database does not exist/)
    expect(result.ms).toBeLessThan(FAILS_WITHIN_MS)
  }, 60_000)

  it("a second server on the same data directory", async () => {
    const dataDir = join(freshDir(), "data")
    const first = await startServer({ ADMIN_TOKEN, DATA_DIR: dataDir })
    try {
      const result = await runToExit({ PORT: String(await freePort()), DATA_DIR: dataDir })
      expectOneLine(result, /DATA_DIR .*: the data directory is in use by process \d+/)
    } finally {
      await first.stop()
    }
  }, 120_000)
})
