/**
 * The soak's servers: each started exactly as `npm start` starts it (the same V8 heap flags and
 * allocator setting, through npm), its node process found under npm so that its own resident
 * memory is sampled and a SIGKILL reaches the server itself, not npm.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { freePort } from "../src/testing.js"
import { residentMb } from "./process-memory.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every process below `pid`, depth first. */
const descendants = (pid: number): Array<number> => {
  try {
    const listed = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
    return listed.flatMap((child) => [Number(child), ...descendants(Number(child))])
  } catch {
    return []
  }
}

const isNode = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("service-auth.mjs")
  } catch {
    return false
  }
}

/** One RSS sample of a server's life. */
export interface Sample {
  readonly atMinute: number
  readonly rssMb: number
  /** The V8 heap reserved (`nodejs_heap_size_total_bytes` of `/metrics`), to tell heap from native growth. */
  heapMb?: number
}

/** One life of a server: from a start to its kill or the end of the soak. */
export interface Life {
  readonly startedAtMinute: number
  readonly samples: Array<Sample>
}

export interface Server {
  readonly name: string
  readonly base: string
  up: boolean
  pid: number | undefined
  /** When (performance.now()) it was last asked for a heap snapshot: writing one stops it for seconds. */
  snapshotAt: number | undefined
  readonly lives: Array<Life>
  start: () => Promise<void>
  kill: () => void
  stop: () => Promise<void>
}

export interface ServerOptions {
  readonly name: string
  readonly env: Record<string, string>
  /** Minutes since the soak's start, for the samples. */
  readonly clock: () => number
  /** Lines of the server's own output, kept for a failure's report. */
  readonly log: (line: string) => void
}

export const makeServer = async (options: ServerOptions): Promise<Server> => {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  const server: Server = {
    name: options.name,
    base,
    up: false,
    pid: undefined,
    snapshotAt: undefined,
    lives: [],
    start: async () => {
      const started = performance.now()
      child = spawn("npm", ["start", "--silent"], {
        cwd: ROOT,
        env: { ...process.env, ...options.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warning" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true
      })
      const keep = (chunk: Buffer) => {
        for (const line of chunk.toString().split("\n")) if (line.trim() !== "") options.log(`[${options.name}] ${line}`)
      }
      child.stdout!.on("data", keep)
      child.stderr!.on("data", keep)
      const exited = new Promise<number | null>((resolve) => child!.once("exit", resolve))
      let ready = false
      while (!ready) {
        if (performance.now() - started > 180_000) throw new Error(`${options.name}: /readyz did not answer 200 within 180 s`)
        const gone = await Promise.race([exited.then(() => true), sleep(0).then(() => false)])
        if (gone) throw new Error(`${options.name} exited during its start (see its output above)`)
        try {
          const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) })
          await response.arrayBuffer()
          ready = response.status === 200
        } catch {
          // not listening yet
        }
        if (!ready) await sleep(200)
      }
      server.pid = descendants(child.pid!).find(isNode)
      if (server.pid === undefined) throw new Error(`${options.name}: no node process under npm`)
      server.lives.push({ startedAtMinute: options.clock(), samples: [] })
      server.up = true
    },
    kill: () => {
      server.up = false
      if (server.pid !== undefined) process.kill(server.pid, "SIGKILL")
      server.pid = undefined
    },
    stop: async () => {
      server.up = false
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child!.once("exit", resolve))
      try {
        process.kill(-child.pid!, "SIGTERM")
      } catch {
        return
      }
      await Promise.race([exited, sleep(15_000)])
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // gone
      }
    }
  }
  return server
}

/** One RSS sample of every server that is up, into its current life. */
export const sampleRss = (servers: ReadonlyArray<Server>, atMinute: number) => {
  for (const server of servers) {
    if (!server.up || server.pid === undefined) continue
    const rssMb = residentMb([server.pid])
    if (rssMb > 0) server.lives.at(-1)?.samples.push({ atMinute, rssMb })
  }
}

/** Adds the V8 heap reserved, read from `/metrics`, to each live server's last sample. */
export const sampleHeaps = async (servers: ReadonlyArray<Server>) => {
  for (const server of servers) {
    const sample = server.up ? server.lives.at(-1)?.samples.at(-1) : undefined
    if (sample === undefined) continue
    try {
      const response = await fetch(`${server.base}/metrics`, { signal: AbortSignal.timeout(5_000) })
      const line = (await response.text()).split("\n").find((l) => l.startsWith("nodejs_heap_size_total_bytes "))
      if (line !== undefined) sample.heapMb = Number(line.split(" ")[1]) / 1_048_576
    } catch {
      // busy or gone: this sample has no heap figure
    }
  }
}

/**
 * Asks every server that is up to write a heap snapshot (`--heapsnapshot-signal=SIGUSR2`). Writing
 * one stops the server's event loop for many seconds and leaves its glibc heap larger by about the
 * snapshot's size (freed, not returned to the system), so a run with snapshots finds what grows, and
 * a run without them gives the slope.
 */
export const snapshotHeaps = (servers: ReadonlyArray<Server>) => {
  for (const server of servers) {
    if (!server.up || server.pid === undefined) continue
    server.snapshotAt = performance.now()
    process.kill(server.pid, "SIGUSR2")
  }
}

/** Within two minutes of a heap snapshot, a request that timed out was cut by the snapshot, not refused. */
export const snapshotting = (server: Server) => server.snapshotAt !== undefined && performance.now() - server.snapshotAt < 120_000
