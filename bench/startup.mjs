// Start-up bench: `npm start` until GET /healthz answers 200 (and until a /readyz sent then is
// answered 200: the storage ready), median of RUNS runs, on an existing
// data directory, a fresh one, or PostgreSQL (DATABASE_URL). Plain JavaScript under node, so the
// bench adds no loader of its own to what it measures.
//
//   node bench/startup.mjs [existing|fresh|postgres ...] [--runs 5] [--node]
//
// --node runs `node dist/service-auth.mjs` instead of `npm start` (what npm itself costs is the
// difference). Each start is killed (its process group) once it answered.
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const at = args.indexOf(name)
  return at === -1 ? fallback : args[at + 1]
}
const RUNS = Number(option("--runs", "5"))
const DIRECT = args.includes("--node")
const modes = args.filter((a, i) => !a.startsWith("--") && args[i - 1] !== "--runs")
const DATABASE_URL = process.env.DATABASE_URL
const ADMIN_TOKEN = "startup-bench-admin-token-0123456789abcdef"

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
    server.once("error", reject)
  })

const healthy = async (url) => {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1000) })
    await response.arrayBuffer()
    return response.status === 200
  } catch {
    return false
  }
}

/**
 * One start: milliseconds from spawn to the first /healthz 200, and to the answer of a /readyz sent
 * right then (every other request waits for the storage); then the process group is stopped.
 */
const startOnce = async (env) => {
  const port = await freePort()
  const command = DIRECT ? process.execPath : "npm"
  const commandArgs = DIRECT ? ["dist/service-auth.mjs"] : ["start", "--silent"]
  const started = performance.now()
  const child = spawn(command, commandArgs, {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", ADMIN_TOKEN, LOG_LEVEL: "warning", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let output = ""
  child.stdout.on("data", (c) => (output += c))
  child.stderr.on("data", (c) => (output += c))
  let exited = false
  const exit = new Promise((resolve) => child.once("exit", () => resolve(exited = true)))
  const url = `http://127.0.0.1:${port}/healthz`
  try {
    while (performance.now() - started < 60_000) {
      if (exited) throw new Error(`exited before answering:\n${output}`)
      if (await healthy(url)) {
        const healthz = performance.now() - started
        // Requests other than /healthz wait for the storage: the first /readyz answer is "ready".
        const ready = await fetch(url.replace("/healthz", "/readyz"), { signal: AbortSignal.timeout(60_000) })
        await ready.arrayBuffer()
        if (ready.status !== 200) throw new Error(`/readyz answered ${ready.status}:\n${output}`)
        return { healthz, ready: performance.now() - started }
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    throw new Error(`no 200 within 60 s:\n${output}`)
  } finally {
    try {
      process.kill(-child.pid, "SIGTERM")
    } catch {
      // Already gone.
    }
    await Promise.race([exit, new Promise((resolve) => setTimeout(resolve, 10_000))])
    if (!exited) process.kill(-child.pid, "SIGKILL")
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const measure = async (mode) => {
  const times = []
  const ready = []
  const existing = mkdtempSync(join(tmpdir(), "service-auth-startup-"))
  try {
    if (mode === "existing") await startOnce({ DATA_DIR: existing, DATABASE_URL: "" }) // made once, then reopened
    if (mode === "postgres") {
      if (DATABASE_URL === undefined) throw new Error("postgres: set DATABASE_URL")
      await startOnce({ DATABASE_URL }) // migrated once
    }
    for (let run = 0; run < RUNS; run++) {
      const fresh = mode === "fresh" ? mkdtempSync(join(tmpdir(), "service-auth-startup-fresh-")) : undefined
      try {
        const env = mode === "postgres"
          ? { DATABASE_URL }
          : { DATA_DIR: fresh ?? existing, DATABASE_URL: "" }
        const start = await startOnce(env)
        times.push(start.healthz)
        ready.push(start.ready)
      } finally {
        if (fresh !== undefined) rmSync(fresh, { recursive: true, force: true })
      }
    }
  } finally {
    rmSync(existing, { recursive: true, force: true })
  }
  const load = loadavg().map((l) => l.toFixed(2)).join(" ")
  console.log(
    `${mode}${DIRECT ? " (node directly)" : " (npm start)"}: median ${median(times).toFixed(0)} ms ` +
      `[${times.map((t) => t.toFixed(0)).join(", ")}]; /readyz 200 (storage ready): median ${median(ready).toFixed(0)} ms ` +
      `[${ready.map((t) => t.toFixed(0)).join(", ")}]; load average ${load}`
  )
}

for (const mode of modes.length > 0 ? modes : ["existing", "postgres", "fresh"]) await measure(mode)
