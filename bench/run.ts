/**
 * `npm run bench`: throughput and latency of the two hot endpoints against a real server process
 * (embedded database, or PostgreSQL when BENCH_DATABASE_URL is set), on 127.0.0.1 only, for a
 * fixed duration each. Prints figures; asserts nothing.
 *
 *   BENCH_SECONDS=5 BENCH_CONCURRENCY=32 npm run bench
 */
import { randomBytes } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { Agent, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startServer } from "../test/support/ServerProcess.js"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })

const send = (base: string, method: string, path: string, headers: Record<string, string>, body?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const url = new URL(path, base)
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method, headers, agent },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk) => (text += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
      }
    )
    req.on("error", reject)
    req.end(body)
  })

const measure = async (name: string, call: () => Promise<{ status: number }>, expected: number) => {
  const latencies: Array<number> = []
  let errors = 0
  const deadline = Date.now() + SECONDS * 1000
  const worker = async () => {
    while (Date.now() < deadline) {
      const started = performance.now()
      const { status } = await call()
      latencies.push(performance.now() - started)
      if (status !== expected) errors++
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2)
  console.log(
    `${name.padEnd(28)} ${(latencies.length / SECONDS).toFixed(0).padStart(7)} req/s  ` +
      `p50 ${at(0.5)} ms  p99 ${at(0.99)} ms  unexpected status: ${errors}`
  )
}

const main = async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "service-auth-bench-"))
  const databaseUrl = process.env.BENCH_DATABASE_URL
  const server = await startServer({
    ADMIN_TOKEN,
    LOG_LEVEL: "warning",
    ...(databaseUrl === undefined ? { DATA_DIR: dataDir } : { DATABASE_URL: databaseUrl })
  })
  try {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }
    const profile = `bench-${randomBytes(4).toString("hex")}`
    await send(server.base, "PUT", `/admin/profiles/${profile}`, admin, "{}")
    await send(server.base, "PUT", `/admin/profiles/${profile}/environments/prod`, admin, "{}")
    const service = JSON.parse((await send(server.base, "POST", `/admin/profiles/${profile}/environments/prod/services`, admin, JSON.stringify({ name: "bench", auth_type: "oauth" }))).text)
    const credential = JSON.parse((await send(server.base, "POST", `/admin/profiles/${profile}/environments/prod/services/${service.uuid}/credentials`, admin, "{}")).text)
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile,
      environment: "prod",
      service_uuid: service.uuid
    }).toString()
    const formHeaders = { "content-type": "application/x-www-form-urlencoded" }
    const token = JSON.parse((await send(server.base, "POST", "/oauth/token", formHeaders, form)).text).access_token
    const callHeaders = { authorization: `Bearer ${token}`, "content-type": "application/json" }
    const callPath = `/service/${profile}/prod/json/${service.uuid}`

    console.log(`service-auth bench: ${databaseUrl === undefined ? "embedded database" : "PostgreSQL"}, ` +
      `${CONCURRENCY} concurrent clients, ${SECONDS} s each, keep-alive, 127.0.0.1`)
    await measure("POST /oauth/token", () => send(server.base, "POST", "/oauth/token", formHeaders, form), 200)
    await measure("POST /service/... (echo)", () => send(server.base, "POST", callPath, callHeaders, `{"amount":42}`), 200)
    await measure("  ... forged token (401)", () =>
      send(server.base, "POST", callPath, { ...callHeaders, authorization: `Bearer ${token.slice(0, -4)}AAAA` }, "{}"), 401)
    await measure("GET /healthz", () => send(server.base, "GET", "/healthz", {}), 200)
  } finally {
    agent.destroy()
    await server.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
