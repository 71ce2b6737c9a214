/**
 * `npm run bench`: service-auth side by side with bare reference servers, on 127.0.0.1 only.
 *
 * It starts service-auth exactly as `npm start` does (on a fresh embedded database, or on
 * PostgreSQL when DATABASE_URL is set) and times it until `GET /healthz` answers 200, creates a
 * profile, an environment, an oauth service and a credential through the admin API, and starts
 * `bare-token-server.ts` and `bare-bearer-server.ts` (node:http + jose, the same claims and checks,
 * no framework, no storage). autocannon then loads each in turn, round after round, ours and bare
 * back to back with the one going first alternating, and the report gives the median of the
 * per-round req/s ratios, p50/p99 latency, non-2xx answers, server CPU per request and server RSS.
 * Absolute req/s move with whatever else the machine does; a ratio measured within one round holds.
 *
 * Two more scenarios have no bare reference: "private_key_jwt tokens" (a key credential of the same
 * service, a fresh ES256 client assertion per request) and "DPoP calls" (a DPoP-bound token, a fresh
 * ES256 proof per call). Each is reported beside service-auth's own figure for the same endpoint in
 * the same round (secret tokens, Bearer calls): what the signature verification and the one-time
 * `jti` cost. The proofs and assertions are signed in this process, per request (bench/signing-clients.ts).
 *
 *   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_CONNECTIONS=50 BENCH_WARMUP_SECONDS=2 [DATABASE_URL=postgres://…] npm run bench
 *
 * Each server gets BENCH_WARMUP_SECONDS of the same load, unmeasured, before its first run (0: none).
 *
 * BENCH_DATABASE_URL is an alias of DATABASE_URL. autocannon runs in this process, on the same
 * machine, so it competes with the server for CPU: compare ratios, not absolute figures.
 */
import autocannon from "autocannon"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { freePort } from "../src/testing.js"
import { type CatalogueResult, printCatalogue, runCatalogue, SERVICES as CATALOGUE_SERVICES } from "./catalogue.js"
import { residentMb } from "./process-memory.js"
import { clientAssertion, dpopProof, es256Key } from "./signing-clients.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))

const positive = (name: string, fallback: number) => {
  const value = Number(process.env[name] || fallback)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`)
  return value
}
export const SECONDS = positive("BENCH_SECONDS", 10)
export const ROUNDS = Math.round(positive("BENCH_ROUNDS", 3))
export const CONNECTIONS = Math.round(positive("BENCH_CONNECTIONS", 50))
/** Untimed load before a server's first measured run: a fresh process is still compiling its hot path. */
export const WARMUP_SECONDS = process.env.BENCH_WARMUP_SECONDS === "0" ? 0 : positive("BENCH_WARMUP_SECONDS", 2)
export const DATABASE_URL = process.env.DATABASE_URL || process.env.BENCH_DATABASE_URL || undefined
export const ADMIN_TOKEN = `bench-${crypto.randomUUID()}`
/**
 * BENCH_RATE_LIMIT=1: the benchmarked service has a per-client rate limit it never reaches
 * (1,000,000 calls a second), so the ratios measure what counting costs a call.
 */
export const RATE_LIMITED = process.env.BENCH_RATE_LIMIT === "1"

/** /proc reports CPU time in clock ticks (USER_HZ), nearly always 100 a second. */
const CLOCK_TICK_US = (() => {
  try {
    return 1e6 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8", timeout: 2_000 }).trim())
  } catch {
    return 1e6 / 100
  }
})()

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const withTimeout = <A>(promise: Promise<A>, ms: number, what: string) =>
  Promise.race([
    promise,
    sleep(ms).then((): never => {
      throw new Error(`${what}: no answer within ${ms / 1000} s`)
    })
  ])

// ------------------------------------------------------------------------------------------------
// Processes: each started in its own group (so one signal reaches npm and the node under it) and
// measured over its whole tree through /proc.

export interface Running {
  readonly name: string
  readonly base: string
  readonly child: ChildProcess
  readonly output: () => string
}

export const running: Array<Running> = []

const treeOf = (pid: number): Array<number> => {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
    return [pid, ...children.flatMap((child) => treeOf(Number(child)))]
  } catch {
    return []
  }
}

const isNpm = (pid: number) => {
  try {
    return /(^|\/)npm( |$)/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, 2).join(" "))
  } catch {
    return false
  }
}

/**
 * The server's processes: the tree, less the npm process `npm start` leaves waiting above
 * service-auth (about 70 MB and no CPU of its own, the same for any npm-started server).
 */
const serverPids = (server: Running) => treeOf(server.child.pid!).filter((pid) => !isNpm(pid))

/** User + system CPU time of the server's processes, in microseconds. */
const cpuMicros = (server: Running) =>
  serverPids(server).reduce((sum, pid) => {
    try {
      // Fields after "comm)": state is [0], utime [11], stime [12].
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ").at(-1)!.split(" ")
      return sum + (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_US
    } catch {
      return sum
    }
  }, 0)

/** Resident memory of the server's processes, in MB. */
const rssMb = (server: Running) => residentMb(serverPids(server))

const spawnGroup = (name: string, base: string, command: string, args: Array<string>, env: Record<string, string>) => {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  // Keep the last few KB for error messages; reading also keeps the pipes from filling up.
  let output = ""
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8_192))
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  const server: Running = { name, base, child, output: () => output }
  running.push(server)
  return server
}

const groupAlive = (pid: number) => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    /* already gone */
  }
}

/** SIGTERM to the whole group, SIGKILL after 5 s if any of it is still alive. */
export const stop = async (server: Running) => {
  const pid = server.child.pid
  if (pid === undefined) return
  signalGroup(pid, "SIGTERM")
  const deadline = Date.now() + 5_000
  while ((server.child.exitCode === null && server.child.signalCode === null) || groupAlive(pid)) {
    if (Date.now() > deadline) {
      console.error(`!! ${server.name} still running 5 s after SIGTERM; SIGKILL`)
      signalGroup(pid, "SIGKILL")
      break
    }
    await sleep(50)
  }
}

// Whatever ends this process, no server outlives it.
process.on("exit", () => {
  for (const server of running) if (server.child.pid !== undefined) signalGroup(server.child.pid, "SIGKILL")
})

/** Polls GET /healthz with short timeouts; resolves with the milliseconds since `startedAt`. */
const untilHealthy = async (server: Running, startedAt: number) => {
  while (Date.now() - startedAt < 60_000) {
    if (server.child.exitCode !== null) throw new Error(`npm start exited with ${server.child.exitCode}:\n${server.output()}`)
    try {
      const response = await fetch(`${server.base}/healthz`, { signal: AbortSignal.timeout(500) })
      await response.arrayBuffer()
      if (response.status === 200) return Date.now() - startedAt
    } catch {
      /* not listening yet */
    }
    await sleep(20)
  }
  throw new Error(`no 200 from ${server.base}/healthz within 60 s:\n${server.output()}`)
}

export const startServiceAuth = async (dataDir: string, env: Record<string, string> = {}) => {
  const port = await freePort()
  const startedAt = Date.now()
  const server = spawnGroup("service-auth", `http://127.0.0.1:${port}`, "npm", ["start", "--silent"], {
    PORT: String(port),
    HOST: "127.0.0.1",
    ADMIN_TOKEN,
    LOG_LEVEL: "warning",
    ...(DATABASE_URL === undefined ? { DATA_DIR: dataDir } : { DATABASE_URL }),
    ...env
  })
  return { server, readyMs: await untilHealthy(server, startedAt) }
}

/** Where the bare servers are compiled to, once per run (removed at exit). */
const compiledDir = mkdtempSync(join(tmpdir(), "service-auth-bench-bare-"))
process.on("exit", () => rmSync(compiledDir, { recursive: true, force: true }))

/**
 * A bare server compiled by esbuild into one file (jose included) and run by node alone, as
 * service-auth runs compiled: under tsx's loader the bare proxy answered about 15% fewer calls a
 * second, and a reference weaker than it can be flatters every ratio against it.
 */
const compiledBare = async (file: string): Promise<string> => {
  const outfile = join(compiledDir, file.replace(/\.ts$/, ".mjs"))
  if (!existsSync(outfile)) {
    const { build } = await import("esbuild")
    await build({
      entryPoints: [join(ROOT, "bench", file)],
      outfile,
      bundle: true,
      platform: "node",
      format: "esm",
      target: `node${process.versions.node.split(".")[0]}`,
      logLevel: "error"
    })
  }
  return outfile
}

/** A bare server, compiled (`compiledBare`): one node process, no npx, tsx or loader above it. */
export const startBare = async (file: string, env: Record<string, string>, port?: number) => {
  port ??= await freePort()
  const server = spawnGroup(file.replace(/\.ts$/, ""), `http://127.0.0.1:${port}`, process.execPath, [
    await compiledBare(file)
  ], { ...env, PORT: String(port) })
  const ready = new Promise<void>((resolve, reject) => {
    let seen = ""
    server.child.stdout!.on("data", (chunk: Buffer) => (seen += chunk.toString()).includes(`listening ${port}`) && resolve())
    server.child.once("exit", (code) => reject(new Error(`${file} exited with ${code}:\n${server.output()}`)))
  })
  await withTimeout(ready, 30_000, file)
  return server
}

// ------------------------------------------------------------------------------------------------
// HTTP set-up and load.

export const admin = async (base: string, method: string, path: string, body: unknown = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000)
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return JSON.parse(text)
}

export interface Request {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
  /** Made afresh for each request sent (a proof or an assertion signed for it); absent: the same each time. */
  readonly fresh?: () => { readonly headers: Record<string, string>; readonly body: string }
}

/** One request before the load, so a server that would answer 4xx is caught before it is timed. */
export const send = async (server: Running, request: Request) => {
  const { body, headers } = request.fresh?.() ?? request
  const response = await fetch(`${server.base}${request.path}`, {
    method: "POST",
    headers,
    body,
    signal: AbortSignal.timeout(10_000)
  })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`${server.name} POST ${request.path}: ${response.status} ${text}`)
  return JSON.parse(text) as Record<string, unknown>
}

/** The token request of a credential for a service, as the scenarios send it. */
export const tokenRequestOf = (
  credential: { readonly client_id: string; readonly client_secret: string },
  profile: string,
  environment: string,
  serviceUuid: string
): Request => ({
  path: "/oauth/token",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({
    grant_type: "client_credentials",
    client_id: credential.client_id,
    client_secret: credential.client_secret,
    profile,
    environment,
    service_uuid: serviceUuid
  }).toString()
})

/** A service call with a token, as the scenarios send it. */
export const serviceCallOf = (token: string, profile: string, environment: string, serviceUuid: string): Request => ({
  path: `/service/${profile}/${environment}/json/${serviceUuid}`,
  headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
  body: `{"amount":42}`
})

export const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as Record<string, unknown>

export interface Measurement {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly cpuPerRequestUs: number
  readonly rssPeakMb: number
  readonly rssMeanMb: number
}

/** `seconds` of autocannon's load with `request` on `server` (failing after 30 s more). */
const autocannonOn = (server: Running, request: Request, seconds: number, what: string) =>
  withTimeout(
    autocannon({
      url: `${server.base}${request.path}`,
      method: "POST",
      headers: request.headers,
      body: request.body,
      ...(request.fresh === undefined ? {} : {
        requests: [{ method: "POST" as const, path: request.path, setupRequest: (sent) => ({ ...sent, ...request.fresh!() }) }]
      }),
      connections: CONNECTIONS,
      duration: seconds,
      pipelining: 1
    }),
    (seconds + 30) * 1000,
    `${what} ${server.name}`
  )

/**
 * WARMUP_SECONDS of the same load, not measured, so that a ratio compares servers whose hot paths
 * are compiled (a fresh service-auth ran its first 3 s at about two thirds of its later rate), as a
 * server that has been up for a while is.
 */
export const warmUp = async (server: Running, request: Request): Promise<void> => {
  if (WARMUP_SECONDS > 0) await autocannonOn(server, request, WARMUP_SECONDS, "warm-up of")
}

export const load = async (server: Running, request: Request): Promise<Measurement> => {
  const samples = [rssMb(server)]
  const sampler = setInterval(() => samples.push(rssMb(server)), 200)
  const cpuBefore = cpuMicros(server)
  try {
    const result = await autocannonOn(server, request, SECONDS, "autocannon on")
    const cpu = cpuMicros(server) - cpuBefore
    // Connection errors and timeouts count with the non-2xx answers: none of them is a success.
    const non2xx = result.non2xx + result.errors + result.timeouts
    if (non2xx > 0) {
      console.error(
        `!! ${server.name} POST ${request.path}: ${non2xx} requests did not succeed ` +
          `(${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts) !!`
      )
    }
    return {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx,
      cpuPerRequestUs: cpu / Math.max(1, result.requests.total),
      rssPeakMb: Math.max(...samples),
      rssMeanMb: samples.reduce((a, b) => a + b, 0) / samples.length
    }
  } finally {
    clearInterval(sampler)
  }
}

// ------------------------------------------------------------------------------------------------
// Report.

export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

export const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

// Column widths: two left-aligned labels, then right-aligned figures.
const WIDTHS = [-18, -19, 8, 7, 7, 8, 11, 17]
export const row = (cells: ReadonlyArray<string>) =>
  cells.map((cell, i) => (WIDTHS[i]! < 0 ? cell.padEnd(-WIDTHS[i]!) : cell.padStart(WIDTHS[i]!))).join(" ").trimEnd()

export const HEADER = row(["", "server", "req/s", "p50 ms", "p99 ms", "non-2xx", "CPU µs/req", "RSS MB mean/peak"])

export const line = (label: string, server: string, m: Measurement) =>
  row([
    label,
    server,
    fmt(m.rps),
    fmt(m.p50, 1),
    fmt(m.p99, 1),
    fmt(m.non2xx),
    fmt(m.cpuPerRequestUs),
    `${fmt(m.rssMeanMb)} / ${fmt(m.rssPeakMb)}`
  ])

/** Medians across rounds; the peak RSS is the highest seen, the non-2xx count the total. */
export const summarise = (list: ReadonlyArray<Measurement>): Measurement => ({
  rps: median(list.map((m) => m.rps)),
  p50: median(list.map((m) => m.p50)),
  p99: median(list.map((m) => m.p99)),
  non2xx: list.reduce((n, m) => n + m.non2xx, 0),
  cpuPerRequestUs: median(list.map((m) => m.cpuPerRequestUs)),
  rssPeakMb: Math.max(...list.map((m) => m.rssPeakMb)),
  rssMeanMb: median(list.map((m) => m.rssMeanMb))
})

export const describeDatabase = () => {
  if (DATABASE_URL === undefined) return "embedded database, fresh data directory"
  try {
    const url = new URL(DATABASE_URL)
    return `PostgreSQL at ${url.host}${url.pathname}` // never the password
  } catch {
    return "PostgreSQL"
  }
}

// ------------------------------------------------------------------------------------------------

// The embedded database's directory; unused on PostgreSQL.
export const dataDir = mkdtempSync(join(tmpdir(), "service-auth-bench-"))

const main = async () => {
  try {
    const { server: ours, readyMs } = await startServiceAuth(dataDir)

    const profile = `bench-${crypto.randomUUID().slice(0, 8)}`
    const environment = "production"
    await admin(ours.base, "PUT", `/admin/profiles/${profile}`)
    await admin(ours.base, "PUT", `/admin/profiles/${profile}/environments/${environment}`)
    const service = await admin(ours.base, "POST", `/admin/profiles/${profile}/environments/${environment}/services`, {
      name: "bench",
      auth_type: "oauth",
      ...(RATE_LIMITED ? { rate_limit: { requests: 1_000_000, per_seconds: 1 } } : {})
    })
    const servicePath = `/admin/profiles/${profile}/environments/${environment}/services/${service.uuid}`
    const credential = await admin(ours.base, "POST", `${servicePath}/credentials`)

    const tokenRequest = tokenRequestOf(credential, profile, environment, service.uuid)
    const token = String((await send(ours, tokenRequest)).access_token)
    const ourClaims = claimsOf(token)
    const callRequest = serviceCallOf(token, profile, environment, service.uuid)

    const bareToken = await startBare("bare-token-server.ts", {
      BARE_CLIENT_ID: credential.client_id,
      BARE_CLIENT_SECRET: credential.client_secret,
      BARE_PROFILE: profile,
      BARE_ENVIRONMENT: environment,
      BARE_SERVICE_UUID: service.uuid,
      // The same issuer, so both sign tokens of the same size.
      BARE_ISSUER: String(ourClaims.iss)
    })
    // It verifies tokens issued by service-auth, so the one token loads both.
    const bareBearer = await startBare("bare-bearer-server.ts", { BARE_JWKS_URL: `${ours.base}/.well-known/jwks.json` })

    // Both sides must do the same work: the same claims in a token, the same answer to a call.
    const bareClaims = claimsOf(String((await send(bareToken, tokenRequest)).access_token))
    const keys = (claims: Record<string, unknown>) => Object.keys(claims).sort().join(",")
    if (keys(bareClaims) !== keys(ourClaims)) {
      console.error(`!! token claims differ: service-auth ${keys(ourClaims)}, bare ${keys(bareClaims)}`)
    }
    // A key credential of the same service, and a DPoP-bound token of the secret one (bench/signing-clients.ts).
    const issuer = String(ourClaims.iss)
    const clientKey = es256Key()
    const keyCredential = await admin(ours.base, "POST", `${servicePath}/credentials`, { public_key: clientKey.jwk })
    const assertionRequest: Request = {
      ...tokenRequest,
      fresh: () => ({
        headers: tokenRequest.headers,
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
          client_assertion: clientAssertion(clientKey, keyCredential.client_id, issuer),
          profile,
          environment,
          service_uuid: service.uuid
        }).toString()
      })
    }
    const proofKey = es256Key()
    const bound = await send(ours, {
      ...tokenRequest,
      headers: { ...tokenRequest.headers, dpop: dpopProof(proofKey, `${issuer}/oauth/token`) }
    })
    if (bound.token_type !== "DPoP") throw new Error(`a token request with a DPoP proof got token_type ${String(bound.token_type)}`)
    const boundToken = String(bound.access_token)
    const boundCall = serviceCallOf(boundToken, profile, environment, service.uuid)
    const dpopCallRequest: Request = {
      ...boundCall,
      fresh: () => ({
        headers: {
          ...boundCall.headers,
          authorization: `DPoP ${boundToken}`,
          dpop: dpopProof(proofKey, `${issuer}${boundCall.path}`, boundToken)
        },
        body: boundCall.body
      })
    }

    const ourEcho = JSON.stringify(await send(ours, callRequest))
    const bareEcho = JSON.stringify(await send(bareBearer, callRequest))
    if (ourEcho !== bareEcho) console.error(`!! echo answers differ:\n  service-auth ${ourEcho}\n  bare         ${bareEcho}`)

    console.log(
      `service-auth bench: ${describeDatabase()}; ${CONNECTIONS} connections, ${SECONDS} s per run, ` +
        `${ROUNDS} round${ROUNDS === 1 ? "" : "s"}; ${cpus().length} cores (${cpus()[0]?.model.trim()}), node ${process.version}`
    )
    console.log(`start-up: npm start until GET /healthz answered 200 in ${fmt(readyMs)} ms`)
    // Whatever npm start printed (at LOG_LEVEL=warning, usually nothing; a stale build says so here).
    const said = ours.output().trim()
    if (said !== "") console.log(said.split("\n").map((l) => `  npm start: ${l}`).join("\n"))
    console.log("")
    console.log(HEADER)

    const scenarios = [
      { name: "tokens", request: tokenRequest, bare: bareToken },
      { name: "service calls", request: callRequest, bare: bareBearer }
    ] as const
    // Without a bare reference: beside service-auth's own figure for the same endpoint.
    const signedScenarios = [
      { name: "private_key_jwt tokens", request: assertionRequest, beside: 0, besideName: "secret tokens" },
      { name: "DPoP calls", request: dpopCallRequest, beside: 1, besideName: "Bearer calls" }
    ] as const
    const results = scenarios.map(() => ({ ours: [] as Array<Measurement>, bare: [] as Array<Measurement> }))
    const signedResults = signedScenarios.map(() => [] as Array<Measurement>)
    for (const scenario of scenarios) {
      await warmUp(ours, scenario.request)
      await warmUp(scenario.bare, scenario.request)
    }
    for (const scenario of signedScenarios) await warmUp(ours, scenario.request)

    for (let round = 1; round <= ROUNDS; round++) {
      for (const [i, scenario] of scenarios.entries()) {
        // Ours first in odd rounds, bare first in even ones, so neither always runs second on a
        // machine the other just heated.
        const order = round % 2 === 1 ? (["ours", "bare"] as const) : (["bare", "ours"] as const)
        for (const who of order) {
          const server = who === "ours" ? ours : scenario.bare
          const measured = await load(server, scenario.request)
          results[i]![who].push(measured)
          console.log(line(`r${round} ${scenario.name}`, server.name, measured))
        }
        const ratio = results[i]!.ours.at(-1)!.rps / results[i]!.bare.at(-1)!.rps
        console.log(row([`r${round} ${scenario.name}`, "ratio ours/bare", `${fmt(ratio, 2)}x`]))
      }
      for (const [i, scenario] of signedScenarios.entries()) {
        const measured = await load(ours, scenario.request)
        signedResults[i]!.push(measured)
        console.log(line(`r${round} ${scenario.name}`, ours.name, measured))
        const ratio = measured.rps / results[scenario.beside]!.ours.at(-1)!.rps
        console.log(row([`r${round} ${scenario.name}`, `to ${scenario.besideName}`, `${fmt(ratio, 2)}x`]))
      }
    }

    console.log("")
    console.log(`medians over ${ROUNDS} round${ROUNDS === 1 ? "" : "s"} (RSS peak: highest seen; non-2xx: total)`)
    console.log(HEADER)
    const summaries = scenarios.map((scenario, i) => {
      const ours = summarise(results[i]!.ours)
      const bare = summarise(results[i]!.bare)
      console.log(line(scenario.name, "service-auth", ours))
      console.log(line(scenario.name, scenario.bare.name, bare))
      const ratio = median(results[i]!.ours.map((m, round) => m.rps / results[i]!.bare[round]!.rps))
      return { scenario, ours, bare, ratio }
    })
    const signedSummaries = signedScenarios.map((scenario, i) => {
      const measured = summarise(signedResults[i]!)
      console.log(line(scenario.name, "service-auth", measured))
      const beside = results[scenario.beside]!.ours
      const ratio = median(signedResults[i]!.map((m, round) => m.rps / beside[round]!.rps))
      return { scenario, measured, ratio }
    })

    console.log("")
    for (const { scenario, ours, bare, ratio } of summaries) {
      console.log(
        `${scenario.name}: ${fmt(ratio, 2)}x bare (ours ${fmt(ours.rps)} req/s p99 ${fmt(ours.p99)} ms, ` +
          `bare ${fmt(bare.rps)} req/s p99 ${fmt(bare.p99)} ms)`
      )
    }
    for (const { measured, ratio, scenario } of signedSummaries) {
      console.log(
        `${scenario.name}: ${fmt(ratio, 2)}x service-auth's ${scenario.besideName} (${fmt(measured.rps)} req/s ` +
          `p99 ${fmt(measured.p99)} ms, CPU ${fmt(measured.cpuPerRequestUs)} µs/req; no bare reference)`
      )
    }
    console.log(`start-up: ${fmt(readyMs)} ms from npm start to GET /healthz 200 (${describeDatabase()})`)

    // The catalogue scenarios (bench/catalogue.ts): on the same server, and with PostgreSQL also on
    // a fresh embedded database (stopped before the PostgreSQL run, so one server runs at a time).
    if (CATALOGUE_SERVICES > 0) {
      const catalogue = (server: Running, database: string) =>
        runCatalogue({
          database,
          base: server.base,
          seconds: SECONDS,
          rounds: ROUNDS,
          connections: CONNECTIONS,
          admin,
          rssMb: () => rssMb(server)
        })
      const results: Array<CatalogueResult> = []
      if (DATABASE_URL !== undefined) {
        const embeddedDir = mkdtempSync(join(tmpdir(), "service-auth-bench-catalogue-"))
        try {
          const { server: embedded } = await startServiceAuth(embeddedDir, { DATA_DIR: embeddedDir, DATABASE_URL: "" })
          results.push(await catalogue(embedded, "embedded"))
          await stop(embedded)
        } finally {
          rmSync(embeddedDir, { recursive: true, force: true })
        }
        results.push(await catalogue(ours, "PostgreSQL"))
      } else {
        results.push(await catalogue(ours, "embedded"))
        console.log("(set DATABASE_URL to run the catalogue scenarios on PostgreSQL too, beside these)")
      }
      printCatalogue(results, SECONDS, CONNECTIONS)
    }

    const failures = summaries.reduce((n, s) => n + s.ours.non2xx + s.bare.non2xx, 0) +
      signedSummaries.reduce((n, s) => n + s.measured.non2xx, 0)
    if (failures > 0) {
      console.error("")
      console.error(`!!!!! ${failures} requests did not succeed: the figures above are not comparable !!!!!`)
      process.exitCode = 1
    }
  } finally {
    for (const server of [...running].reverse()) await stop(server)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

// Ctrl-C reaches only this process (the servers are in their own groups): stop them, then leave.
let interrupted = false
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`\n${signal}: stopping the servers`)
    Promise.all(running.map(stop)).finally(() => {
      rmSync(dataDir, { recursive: true, force: true })
      process.exit(130)
    })
  })
}

// The proxy scenarios (bench/proxy.ts) import the helpers above; only `npm run bench` runs main.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main()
    .catch((error) => {
      console.error(error instanceof Error ? error.message : error)
      process.exitCode = 1
    })
    // Nothing left to wait for; exit even if a timed-out load is still holding sockets open.
    .finally(() => process.exit())
}
