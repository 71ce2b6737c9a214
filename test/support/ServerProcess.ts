/**
 * The real server as a child process, started with `npm start` exactly as an operator does (npm
 * runs `node dist/service-auth.mjs`; the vitest global setup has built it), on a free port. For tests
 * that need what only a process has: several instances on one database, signals, the embedded
 * database in a data directory. `child` is the npm process; `serverPid()` the node process under it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { get as httpsGet } from "node:https"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll } from "vitest"
import { freePort } from "../../src/testing.js"

const ROOT = fileURLToPath(new URL("../../", import.meta.url))

export { freePort }

/** GET /healthz over HTTPS, checking the certificate against `ca` for the name localhost. */
const secureHealthStatus = (port: number, ca: string | Buffer) =>
  new Promise<number>((resolve, reject) => {
    const request = httpsGet(
      { host: "127.0.0.1", port, path: "/healthz", ca, servername: "localhost", agent: false, timeout: 2_000 },
      (response) => {
        response.resume()
        resolve(response.statusCode ?? 0)
      }
    )
    request.once("timeout", () => request.destroy(new Error("timeout")))
    request.once("error", reject)
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * `npm start` with the given settings run to its exit (or killed at the deadline): for starts that
 * must fail. The deadline catches a hang, not slowness: npm and node may start slowly on a busy machine.
 */
export const runToExit = (env: Readonly<Record<string, string>>, deadlineMs = 35_000) =>
  new Promise<{ code: number | null; output: string; ms: number }>((resolve) => {
    const started = Date.now()
    const child = spawn("npm", ["start", "--silent"], {
      cwd: ROOT,
      env: { ...process.env, HOST: "127.0.0.1", LOG_LEVEL: "warning", ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), deadlineMs)
    // "close", not "exit": only then has all it wrote been read (at "exit" its last line may still
    // be in the pipe, and a start that failed would seem to have said nothing).
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, output, ms: Date.now() - started })
    })
  })

export interface ServerProcess {
  readonly base: string
  readonly port: number
  readonly child: ChildProcess
  /** The node process serving (the child of `npm start`). */
  readonly serverPid: () => number
  /** Everything the process printed so far. */
  readonly log: () => string
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (null when killed). */
  readonly stop: (graceMs?: number) => Promise<number | null>
}

export interface StartOptions {
  readonly healthTimeoutMs?: number
  /** Start the server under this umask (octal, e.g. "022"), as a shell would. */
  readonly umask?: string
  /** The server speaks HTTPS (TLS_CERT_FILE in `env`) with a certificate for localhost this CA issued. */
  readonly tlsCa?: string | Buffer
}

/**
 * What a start prints when its first statements outlasted the storage timeout (1.5 s): on a loaded
 * machine, the first statements on a fresh embedded directory can. Not what the tests that start a
 * server are about, so `startServer` starts it once more; a start that must fail is `runToExit`'s.
 */
const SLOW_FIRST_STATEMENTS = /The database is unavailable/

/**
 * `npm start` until GET /healthz answers 200 and a GET /readyz sent then answers 200 (the server
 * ready: storage, migrations and keys); once more when the first start failed only because
 * the machine was too slow for the storage timeout (`SLOW_FIRST_STATEMENTS`).
 */
export const startServer = async (
  env: Readonly<Record<string, string>>,
  options: StartOptions = {}
): Promise<ServerProcess> => {
  try {
    return await startServerOnce(env, options)
  } catch (error) {
    if (!SLOW_FIRST_STATEMENTS.test(String(error))) throw error
    console.warn(`a server start outlasted the storage timeout; starting it once more:\n${String(error)}`)
    return await startServerOnce(env, options)
  }
}

class NotReady extends Error {}

/**
 * A /readyz sent once /healthz answered is held until storage, migrations and keys are ready, then
 * answered: 200, or 503 when the start failed (its line is in the log once the process exited). A
 * 503 from a server still running is a probe that outlasted the storage timeout (1.5 s) on a loaded
 * machine, as a load balancer's would: asked again until the deadline.
 */
const untilReady = async (base: string, deadline: number, exited: Promise<number | null>, log: () => string) => {
  for (;;) {
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(Math.max(deadline - Date.now(), 1_000)) })
    if (response.status === 200) return
    const code = await Promise.race([exited, sleep(1_000).then(() => "still running")])
    if (code !== "still running" || Date.now() >= deadline) {
      throw new NotReady(`server answered /healthz but not /readyz (${response.status}; exit: ${code}):\n${log()}`)
    }
  }
}

const startServerOnce = async (env: Readonly<Record<string, string>>, options: StartOptions): Promise<ServerProcess> => {
  const port = await freePort()
  const base = `${options.tlsCa === undefined ? "http" : "https"}://127.0.0.1:${port}`
  let log = ""
  const command = ["npm", "start", "--silent"]
  const [file, ...args] = options.umask === undefined
    ? command
    : ["/bin/sh", "-c", `umask ${options.umask} && exec "$0" "$@"`, ...command]
  const child = spawn(file!, args, {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warning", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so a signal can reach npm and the node process it starts.
    detached: true
  })
  child.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()))
  // "close": after all the process wrote was read, so a test reading its log after `stop` sees its last lines.
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)))
  const serverPid = () => {
    const npm = child.pid!
    const children = readFileSync(`/proc/${npm}/task/${npm}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
    const node = children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("dist/service-auth.mjs"))
    if (node === undefined) throw new Error(`no node process running dist/service-auth.mjs under npm (${npm})`)
    return Number(node)
  }

  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, name)
    } catch {
      /* already gone */
    }
  }
  const stop = async (graceMs = 15_000) => {
    if (child.exitCode !== null) return child.exitCode
    signal("SIGTERM")
    const timer = setTimeout(() => signal("SIGKILL"), graceMs)
    const code = await exited
    clearTimeout(timer)
    return code
  }

  // Generous: on a busy machine npm and node alone can take tens of seconds to start.
  const deadline = Date.now() + (options.healthTimeoutMs ?? 120_000)
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} before it was healthy:\n${log}`)
    try {
      const status = options.tlsCa === undefined
        ? (await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) })).status
        : await secureHealthStatus(port, options.tlsCa)
      if (status === 200) {
        // Over plain HTTP /healthz answers while the storage starts; /readyz waits for the server.
        if (options.tlsCa === undefined) await untilReady(base, deadline, exited, () => log)
        return { base, port, child, serverPid, log: () => log, stop }
      }
    } catch (error) {
      if (error instanceof NotReady) throw error
      /* not listening yet */
    }
    await sleep(200)
  }
  await stop(1_000)
  throw new Error(`server did not answer GET /healthz within the deadline:\n${log}`)
}

/**
 * Two instances on one database (`env` read when they start), started before the enclosing
 * `describe`'s tests and stopped after them: what a multi-instance suite shares.
 */
export const twoInstances = (env: () => Readonly<Record<string, string>>) => {
  const instances = {} as { first: ServerProcess; second: ServerProcess }
  beforeAll(async () => {
    ;[instances.first, instances.second] = await Promise.all([startServer(env()), startServer(env())])
  }, 120_000)
  afterAll(async () => {
    await Promise.all([instances.first?.stop(), instances.second?.stop()])
  })
  return instances
}
