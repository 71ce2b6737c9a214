/**
 * The writes scenario of `bench/catalogue.ts` on a server started apart, for `node --cpu-prof`:
 * spread token requests over a catalogue provisioned by `bench/provision-catalogue.ts`, after a
 * warm-up, without and then (WRITES=1) with ~5 catalogue writes a second in another profile, against a server already
 * running at BASE (start it yourself, e.g. `node --cpu-prof dist/service-auth.mjs`).
 *
 *   BASE=http://127.0.0.1:3000 ADMIN_TOKEN=... CATALOGUE_CREDENTIALS=20000 WRITES=1 npx tsx bench/catalogue-profile.ts
 */
import autocannon from "autocannon"
import { catalogueTokenBody, ENVIRONMENT } from "./provision-catalogue.js"

const base = process.env.BASE ?? "http://127.0.0.1:3000"
const credentials = Number(process.env.CATALOGUE_CREDENTIALS ?? 20_000)
const seconds = Number(process.env.BENCH_SECONDS ?? 5)
const seed = process.env.CATALOGUE_SEED ?? "bench"
const writes = process.env.WRITES === "1"
const adminToken = process.env.ADMIN_TOKEN ?? ""

const admin = async (method: string, path: string, body: unknown = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

const bodies = Array.from({ length: credentials }, (_, i) => catalogueTokenBody(seed, i))

const tokens = async () => {
  const result = await autocannon({
    url: `${base}/oauth/token`,
    connections: 50,
    duration: seconds,
    requests: [{
      method: "POST",
      setupRequest: (request: any) => ({
        ...request,
        body: bodies[Math.floor(Math.random() * bodies.length)],
        headers: { "content-type": "application/x-www-form-urlencoded" }
      })
    }]
  } as any)
  return { rps: result.requests.average, failed: result.non2xx + result.errors + result.timeouts }
}

const main = async () => {
  const warm = await tokens()
  console.log(`warm-up: ${warm.rps.toFixed(0)}/s`)
  const without = await tokens()
  console.log(`tokens spread: ${without.rps.toFixed(0)}/s, ${without.failed} failed`)
  if (!writes) return
  const other = `writes-${crypto.randomUUID().slice(0, 8)}`
  await admin("PUT", `/admin/profiles/${other}`)
  await admin("PUT", `/admin/profiles/${other}/environments/${ENVIRONMENT}`)
  let writing = true
  let done = 0
  const writer = (async () => {
    while (writing) {
      const tick = performance.now()
      const service = await admin("POST", `/admin/profiles/${other}/environments/${ENVIRONMENT}/services`, { auth_type: "oauth" })
      await admin("DELETE", `/admin/profiles/${other}/environments/${ENVIRONMENT}/services/${service.uuid}`)
      done += 2
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 400 - (performance.now() - tick))))
    }
  })()
  const at = performance.now()
  const measured = await tokens()
  writing = false
  await writer
  console.log(
    `tokens spread with writes: ${measured.rps.toFixed(0)}/s, ${measured.failed} failed; ` +
      `${(done / ((performance.now() - at) / 1000)).toFixed(1)} writes/s; ratio ${(measured.rps / without.rps).toFixed(2)}x`
  )
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
