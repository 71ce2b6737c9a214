/**
 * Start-up with a big catalogue (provisioned by `bench/provision-catalogue.ts` with the same
 * `CATALOGUE_SEED`): `npm start` until `GET /healthz` answers 200, a token request for a credential
 * at once (the catalogue loads in the background: it must be served meanwhile), then the server's
 * RSS once the load has settled (steady for 3 s, at most 60 s).
 *
 *   DATA_DIR=/tmp/big CATALOGUE_CREDENTIALS=100000 npx tsx bench/catalogue-start.ts
 *   DATABASE_URL=postgres://... ADMIN_TOKEN=x CATALOGUE_CREDENTIALS=100000 npx tsx bench/catalogue-start.ts
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import { catalogueTokenBody } from "./provision-catalogue.js"
import { residentMb } from "./process-memory.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

/** The node process under npm: the server (npm's own memory is not the server's). */
const rssMb = (npmPid: number) => {
  const children = (pid: number): Array<number> => {
    try {
      const listed = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
      return listed.flatMap((child) => [Number(child), ...children(Number(child))])
    } catch {
      return []
    }
  }
  return residentMb(children(npmPid))
}

const main = async () => {
  const credentials = Number(process.env.CATALOGUE_CREDENTIALS ?? 20_000)
  const seed = process.env.CATALOGUE_SEED ?? "bench"
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const startedAt = performance.now()
  const child = spawn("npm", ["start", "--silent"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warning" },
    stdio: ["ignore", "inherit", "inherit"],
    detached: true
  })
  try {
    let readyMs: number | undefined
    while (readyMs === undefined) {
      if (performance.now() - startedAt > 120_000) throw new Error("no 200 from /healthz within 120 s")
      try {
        const response = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(500) })
        await response.arrayBuffer()
        if (response.status === 200) readyMs = performance.now() - startedAt
      } catch {
        await sleep(20)
      }
    }
    const rssAtReady = rssMb(child.pid!)
    // The last credential: the one a load in pages reaches last.
    const tokenAt = performance.now()
    const response = await fetch(`${base}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: catalogueTokenBody(seed, credentials - 1)
    })
    await response.arrayBuffer()
    const tokenMs = performance.now() - tokenAt
    let rss = rssMb(child.pid!)
    let steadySince = performance.now()
    const settleStart = performance.now()
    while (performance.now() - steadySince < 3_000 && performance.now() - settleStart < 60_000) {
      await sleep(250)
      const now = rssMb(child.pid!)
      if (Math.abs(now - rss) > 2) steadySince = performance.now()
      rss = now
    }
    console.log(
      `${credentials.toLocaleString("en-US")} credentials, ${process.env.DATABASE_URL ? "PostgreSQL" : "embedded"}: ` +
        `/healthz 200 ${readyMs.toFixed(0)} ms after npm start (RSS ${rssAtReady.toFixed(0)} MB); ` +
        `token for the last credential at once: ${response.status} in ${tokenMs.toFixed(0)} ms; ` +
        `RSS ${rss.toFixed(0)} MB once loaded`
    )
  } finally {
    try {
      process.kill(-child.pid!, "SIGTERM")
    } catch {
      /* gone */
    }
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error)
  process.exitCode = 1
})
