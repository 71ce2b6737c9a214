/**
 * `npm run bench`: service-auth side by side with bare reference servers, on 127.0.0.1 only.
 *
 * It starts service-auth exactly as `npm start` does (on a fresh embedded database, or on
 * PostgreSQL when DATABASE_URL is set), creates a profile, an oauth service and a credential, and
 * starts `bare-token-server.ts` and `bare-bearer-server.ts` (node:http + jose, the same claims and
 * checks, no framework). autocannon then loads each in turn, alternating ours and bare every round,
 * and the report gives per-round ratios (their median is the figure), p50/p99 latency, server CPU
 * per request and server RSS. Absolute req/s move with whatever else the machine does; a ratio
 * measured within one round holds.
 *
 *   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_CONNECTIONS=50 [DATABASE_URL=postgres://…] npm run bench
 */
import autocannon from "autocannon"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePort } from "../test/support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const DATABASE_URL = process.env.DATABASE_URL || process.env.BENCH_DATABASE_URL || undefined
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const CLOCK_TICK_US = 1e6 / 100 // USER_HZ: /proc reports CPU time in 1/100 s on Linux

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ------------------------------------------------------------------------------------------------
// Processes: started in their own group, measured over their whole tree through /proc.

interface Running {
  readonly name: string
  readonly base: string
  readonly child: ChildProcess
}

const treeOf = (pid: number): Array<number> => {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
    return [pid, ...children.flatMap((child) => treeOf(Number(child)))]
  } catch {
    return []
  }
}

/** User + system CPU time of the process tree, in microseconds. */
const cpuMicros = (pid: number) =>
  treeOf(pid).reduce((sum, p) => {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1]!.split(" ")
      return sum + (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_US
    } catch {
      return sum
    }
  }, 0)

/**
 * Resident memory of the server, in MB: the process tree, less the npm process that `npm start`
 * leaves waiting above service-auth (about 70 MB of its own, the same for any npm-started server).
 */
const rssMb = (pid: number) =>
  treeOf(pid).filter((p) => !isNpm(p)).reduce((sum, p) => {
    try {
      const line = readFileSync(`/proc/${p}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
      return sum + Number(line?.split(/\s+/)[1] ?? 0) / 1024
    } catch {
      return sum
    }
  }, 0)

const isNpm = (pid: number) => {
  try {
    return /(^|\/)npm( |\0|$)/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, 2).join(" "))
  } catch {
    return false
  }
}

const spawnGroup = (command: string, args: Array<string>, env: Record<string, string>) =>
  spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true })

const stop = async (running: Running) => {
  const pid = running.child.pid!
  if (running.child.exitCode !== null) return
  const exited = new Promise((resolve) => running.child.once("exit", resolve))
  process.kill(-pid, "SIGTERM")
  if (await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)])) return
  process.kill(-pid, "SIGKILL")
  await exited
}

/** Polls GET /healthz with short timeouts; resolves with the time since `startedAt`. */
const untilHealthy = async (base: string, child: ChildProcess, startedAt: number, output: () => string) => {
  while (Date.now() - startedAt < 60_000) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}:\n${output()}`)
    try {
      const response = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(1_000) })
      if (response.status === 200) return Date.now() - startedAt
    } catch {
      /* not listening yet */
    }
    await sleep(20)
  }
  throw new Error(`no answer from ${base}/healthz within 60 s:\n${output()}`)
}

const startServiceAuth = async (dataDir: string) => {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const startedAt = Date.now()
  const child = spawnGroup("npm", ["start", "--silent"], {
    PORT: String(port),
    HOST: "127.0.0.1",
    ADMIN_TOKEN,
    LOG_LEVEL: "warning",
    ...(DATABASE_URL === undefined ? { DATA_DIR: dataDir } : { DATABASE_URL })
  })
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const readyMs = await untilHealthy(base, child, startedAt, () => output)
  return { running: { name: "service-auth", base, child }, readyMs }
}

const startBare = async (file: string, env: Record<string, string>): Promise<Running> => {
  const port = await freePort()
  const child = spawnGroup(process.execPath, ["--import", "tsx", join("bench", file)], { ...env, PORT: String(port) })
  let output = ""
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => chunk.toString().includes("listening") && resolve())
    child.once("exit", (code) => reject(new Error(`${file} exited with ${code}:\n${output}`)))
  })
  return { name: file.replace(/\.ts$/, ""), base: `http://127.0.0.1:${port}`, child }
}

// ------------------------------------------------------------------------------------------------
// Load.

interface Request {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
}

interface Measurement {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly cpuPerRequestUs: number
  readonly rssPeakMb: number
  readonly rssMeanMb: number
  readonly unexpected: number
}

const load = async (server: Running, request: Request): Promise<Measurement> => {
  const pid = server.child.pid!
  const samples: Array<number> = []
  const sampler = setInterval(() => samples.push(rssMb(pid)), 200)
  const cpuBefore = cpuMicros(pid)
  const result = await autocannon({
    url: `${server.base}${request.path}`,
    method: "POST",
    headers: request.headers,
    body: request.body,
    connections: CONNECTIONS,
    duration: SECONDS,
    pipelining: 1
  })
  const cpu = cpuMicros(pid) - cpuBefore
  clearInterval(sampler)
  const unexpected = result.non2xx + result.errors + result.timeouts
  if (unexpected > 0) console.error(`!! ${server.name} ${request.path}: ${unexpected} answers were not 2xx (or failed)`)
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuPerRequestUs: cpu / Math.max(1, result.requests.total),
    rssPeakMb: Math.max(0, ...samples),
    rssMeanMb: samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length),
    unexpected
  }
}

// ------------------------------------------------------------------------------------------------

const admin = async (base: string, method: string, path: string, body: unknown = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return JSON.parse(text)
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

const main = async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "service-auth-bench-"))
  const running: Array<Running> = []
  try {
    if (!existsSync(join(ROOT, "dist/service-auth.mjs"))) throw new Error("run npm install (or npm run build) first")
    const { running: ours, readyMs } = await startServiceAuth(dataDir)
    running.push(ours)

    const profile = `bench-${randomBytes(4).toString("hex")}`
    const environment = "production"
    await admin(ours.base, "PUT", `/admin/profiles/${profile}`)
    await admin(ours.base, "PUT", `/admin/profiles/${profile}/environments/${environment}`)
    const service = await admin(ours.base, "POST", `/admin/profiles/${profile}/environments/${environment}/services`, {
      name: "bench",
      auth_type: "oauth"
    })
    const servicePath = `/admin/profiles/${profile}/environments/${environment}/services/${service.uuid}`
    const credential = await admin(ours.base, "POST", `${servicePath}/credentials`)
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile,
      environment,
      service_uuid: service.uuid
    }).toString()
    const tokenRequest: Request = {
      path: "/oauth/token",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form
    }
    const issued = await fetch(`${ours.base}/oauth/token`, { method: "POST", headers: tokenRequest.headers, body: form })
    const { access_token: token } = (await issued.json()) as { access_token: string }
    const callRequest: Request = {
      path: `/service/${profile}/${environment}/json/${service.uuid}`,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: `{"amount":42}`
    }

    const bareToken = await startBare("bare-token-server.ts", {
      BARE_CLIENT_ID: credential.client_id,
      BARE_CLIENT_SECRET: credential.client_secret,
      BARE_PROFILE: profile,
      BARE_ENVIRONMENT: environment,
      BARE_SERVICE_UUID: service.uuid,
      BARE_ISSUER: "http://localhost"
    })
    running.push(bareToken)
    const bareBearer = await startBare("bare-bearer-server.ts", { BARE_JWKS_URL: `${ours.base}/.well-known/jwks.json` })
    running.push(bareBearer)

    const storage = DATABASE_URL === undefined ? "embedded database" : "PostgreSQL"
    console.log(
      `service-auth bench: ${storage}; ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} rounds; ` +
        `${cpus().length} cores (${cpus()[0]?.model.trim()}), node ${process.version}`
    )
    console.log(`npm start until GET /healthz answered 200: ${fmt(readyMs)} ms (fresh ${storage === "PostgreSQL" ? "connection" : "data directory"})`)

    const scenarios = [
      { name: "tokens", request: tokenRequest, bare: bareToken },
      { name: "service calls", request: callRequest, bare: bareBearer }
    ] as const
    const results = new Map<string, { ours: Array<Measurement>; bare: Array<Measurement> }>()
    for (const scenario of scenarios) results.set(scenario.name, { ours: [], bare: [] })

    for (let round = 1; round <= ROUNDS; round++) {
      for (const scenario of scenarios) {
        const entry = results.get(scenario.name)!
        // Alternate which goes first, so neither always runs on a machine the other just warmed.
        const order = round % 2 === 1 ? ["ours", "bare"] as const : ["bare", "ours"] as const
        for (const who of order) {
          const measured = await load(who === "ours" ? ours : scenario.bare, scenario.request)
          entry[who].push(measured)
          console.log(
            `round ${round} ${scenario.name.padEnd(13)} ${who.padEnd(4)} ${fmt(measured.rps).padStart(7)} req/s  ` +
              `p50 ${fmt(measured.p50, 1)} ms  p99 ${fmt(measured.p99, 1)} ms  ${fmt(measured.cpuPerRequestUs)} µs CPU/req  ` +
              `RSS peak ${fmt(measured.rssPeakMb)} MB`
          )
        }
      }
    }

    console.log("")
    for (const scenario of scenarios) {
      const { bare, ours: mine } = results.get(scenario.name)!
      const ratio = median(mine.map((m, i) => m.rps / bare[i]!.rps))
      const pick = (list: Array<Measurement>, key: keyof Measurement) => median(list.map((m) => m[key]))
      console.log(
        `${scenario.name}: ${fmt(ratio, 2)}x ${scenario.bare.name} (median of per-round ratios)\n` +
          `  service-auth ${fmt(pick(mine, "rps")).padStart(7)} req/s  p50 ${fmt(pick(mine, "p50"), 1)} ms  ` +
          `p99 ${fmt(pick(mine, "p99"), 1)} ms  ${fmt(pick(mine, "cpuPerRequestUs"))} µs CPU/req  ` +
          `RSS ${fmt(pick(mine, "rssMeanMb"))} MB (peak ${fmt(Math.max(...mine.map((m) => m.rssPeakMb)))} MB)\n` +
          `  bare         ${fmt(pick(bare, "rps")).padStart(7)} req/s  p50 ${fmt(pick(bare, "p50"), 1)} ms  ` +
          `p99 ${fmt(pick(bare, "p99"), 1)} ms  ${fmt(pick(bare, "cpuPerRequestUs"))} µs CPU/req  ` +
          `RSS ${fmt(pick(bare, "rssMeanMb"))} MB`
      )
    }
    const failures = [...results.values()].flatMap((r) => [...r.ours, ...r.bare]).reduce((n, m) => n + m.unexpected, 0)
    if (failures > 0) {
      console.error(`!! ${failures} answers were not 2xx: the figures above are not comparable`)
      process.exitCode = 1
    }
  } finally {
    for (const server of running.reverse()) await stop(server)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
