/**
 * `npm run soak`: hours of steady load on the production topology, run by hand (never by
 * `npm test`), to show that each server's memory levels off.
 *
 * PostgreSQL mode (SOAK_DATABASE_URL or DATABASE_URL set, an empty database): two instances,
 * started as `npm start` starts them, on the one database. Embedded mode: one instance on a fresh
 * data directory (the directory is locked by its server: a second instance cannot share it). Both
 * modes: SOAK_TOKEN_LOOPS loops take tokens for SOAK_SERVICES * 2 credentials, SOAK_CALL_LOOPS loops
 * call the services with the cached tokens, one loop creates a service on one instance, calls it
 * on another, deletes it and checks that it no longer answers anywhere (a 200 is a violation), and
 * one loop sends what a caller may choose freely (paths, request ids, forged tokens, client ids,
 * loopback source addresses across 127.0.0.0/8). The first instance is killed with SIGKILL at
 * SOAK_KILL_AT_MINUTES and started again at once. Each server's RSS is sampled every
 * SOAK_SAMPLE_SECONDS; the report gives its least-squares slope after SOAK_WARMUP_MINUTES of each
 * life (a restarted instance's warm-up counts from its restart).
 *
 *   SOAK_MODE=embedded|postgres|both SOAK_MINUTES=60 SOAK_WARMUP_MINUTES=10 npm run soak
 *   SOAK_DATABASE_URL=postgres://postgres@127.0.0.1:5432/soak SOAK_MODE=postgres npm run soak
 *
 * SOAK_HEAP_SNAPSHOT_MINUTES=5,10 asks every live server for a heap snapshot at those minutes
 * (written to SOAK_SNAPSHOT_DIR, default the system's temporary directory) to compare by
 * constructor. SOAK_PAUSE_MS pauses each loop between requests (0: none). Exits 1 on any error
 * or violation. Every request goes to loopback addresses only.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { callLoop, lifecycleLoop, newCounts, noiseLoop, provision, tokenLoop, type Topology } from "./soak-loops.js"
import { fitLives, printReport, type ModeResult } from "./soak-report.js"
import { makeServer, sampleHeaps, sampleRss, type Server, snapshotHeaps } from "./soak-servers.js"

const number = (name: string, fallback: number) => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0, got ${raw}`)
  return value
}

const settings = () => {
  const minutes = number("SOAK_MINUTES", 60)
  const mode = process.env.SOAK_MODE ?? "both"
  if (!["embedded", "postgres", "both"].includes(mode)) throw new Error(`SOAK_MODE must be embedded, postgres or both, got ${mode}`)
  const databaseUrl = process.env.SOAK_DATABASE_URL ?? process.env.DATABASE_URL
  if (mode !== "embedded" && databaseUrl === undefined) {
    throw new Error(`SOAK_MODE=${mode} needs SOAK_DATABASE_URL (an empty PostgreSQL database)`)
  }
  return {
    minutes,
    mode,
    databaseUrl,
    warmupMinutes: number("SOAK_WARMUP_MINUTES", Math.min(10, minutes / 4)),
    killAtMinutes: number("SOAK_KILL_AT_MINUTES", minutes * 0.4),
    sampleSeconds: number("SOAK_SAMPLE_SECONDS", 30),
    services: number("SOAK_SERVICES", 300),
    tokenLoops: number("SOAK_TOKEN_LOOPS", 8),
    callLoops: number("SOAK_CALL_LOOPS", 16),
    pauseMs: number("SOAK_PAUSE_MS", 0),
    snapshotMinutes: (process.env.SOAK_HEAP_SNAPSHOT_MINUTES ?? "").split(",").filter((s) => s.trim() !== "").map(Number),
    snapshotDir: process.env.SOAK_SNAPSHOT_DIR ?? tmpdir()
  }
}
type Settings = ReturnType<typeof settings>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const runMode = async (settings: Settings, mode: "embedded" | "postgres"): Promise<ModeResult> => {
  const started = performance.now()
  const clock = () => (performance.now() - started) / 60_000
  const adminToken = randomBytes(32).toString("base64url")
  const dataDir = mode === "embedded" ? mkdtempSync(join(tmpdir(), "service-auth-soak-")) : undefined
  const env: Record<string, string> = {
    ADMIN_TOKEN: adminToken,
    ...(mode === "postgres" ? { DATABASE_URL: settings.databaseUrl! } : { DATA_DIR: dataDir! }),
    ...(settings.snapshotMinutes.length > 0
      ? { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${settings.snapshotDir}` }
      : {})
  }
  const output: Array<string> = []
  const log = (line: string) => {
    output.push(line)
    if (output.length > 200) output.shift()
  }
  const servers: Array<Server> = []
  for (const name of mode === "postgres" ? ["A", "B"] : ["A"]) servers.push(await makeServer({ name, env, clock, log }))
  const counts = newCounts()
  const deadline = settings.minutes
  try {
    for (const server of servers) await server.start()
    const base = { servers, adminToken, profile: "soak", environment: "production", counts, pauseMs: settings.pauseMs }
    const credentials = await provision({ ...base, until: () => false }, settings.services)
    console.log(
      `[${mode}] ${servers.length} instance(s) up, ${credentials.length} credentials of ${settings.services} services provisioned in ${
        clock().toFixed(1)
      } min`
    )
    const loadStart = clock()
    const topology: Topology = { ...base, credentials, until: () => clock() - loadStart >= deadline }
    const loops = [
      ...Array.from({ length: settings.tokenLoops }, () => tokenLoop(topology)),
      ...Array.from({ length: settings.callLoops }, () => callLoop(topology)),
      lifecycleLoop(topology),
      noiseLoop(topology)
    ]
    let killed = false
    const snapshots = [...settings.snapshotMinutes]
    let nextSample = 0
    while (!topology.until()) {
      const minute = clock() - loadStart
      if (minute >= nextSample) {
        sampleRss(servers, clock())
        await sampleHeaps(servers)
        nextSample += settings.sampleSeconds / 60
        const rss = servers.map((s) => {
          const last = s.up ? s.lives.at(-1)?.samples.at(-1) : undefined
          return last === undefined ? `${s.name} -` : `${s.name} ${last.rssMb.toFixed(0)} MB (V8 heap ${last.heapMb?.toFixed(0) ?? "?"} MB)`
        }).join(", ")
        console.log(
          `[${mode}] ${
            minute.toFixed(1)
          } min: ${counts.tokens} tokens, ${counts.calls} calls, ${counts.lifecycles} lifecycles, ${counts.noise} noise, ${
            [...counts.errors.values()].reduce((a, b) => a + b, 0)
          } errors, ${counts.violations} violations; RSS ${rss}`
        )
      }
      if (snapshots.length > 0 && minute >= snapshots[0]!) {
        snapshots.shift()
        snapshotHeaps(servers)
        console.log(`[${mode}] heap snapshots asked at ${minute.toFixed(1)} min (into ${settings.snapshotDir})`)
      }
      if (!killed && minute >= settings.killAtMinutes) {
        killed = true
        const victim = servers[0]!
        console.log(`[${mode}] SIGKILL to ${victim.name} at ${minute.toFixed(1)} min; starting it again`)
        victim.kill()
        await victim.start()
        console.log(`[${mode}] ${victim.name} answers again at ${(clock() - loadStart).toFixed(1)} min`)
      }
      await sleep(1_000)
    }
    await Promise.all(loops)
    return { mode, minutes: clock() - loadStart, counts, lives: fitLives(servers, settings.warmupMinutes) }
  } catch (error) {
    console.error(output.join("\n"))
    throw error
  } finally {
    for (const server of servers) await server.stop()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  }
}

const main = async () => {
  const chosen = settings()
  console.log(
    `soak: ${chosen.mode}, ${chosen.minutes} min (warm-up ${chosen.warmupMinutes} min, kill at ${chosen.killAtMinutes} min), ` +
      `${chosen.services * 2} credentials, ${chosen.tokenLoops} token + ${chosen.callLoops} call loops, RSS every ${chosen.sampleSeconds} s`
  )
  const results: Array<ModeResult> = []
  if (chosen.mode !== "postgres") results.push(await runMode(chosen, "embedded"))
  if (chosen.mode !== "embedded") results.push(await runMode(chosen, "postgres"))
  const failed = printReport(results, chosen.warmupMinutes)
  process.exit(failed ? 1 : 0)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
