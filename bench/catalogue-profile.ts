/**
 * The writes scenario of `bench/catalogue.ts` on a server started apart, for `node --cpu-prof`:
 * spread token requests (or calls) over a catalogue provisioned by `bench/provision-catalogue.ts`,
 * without and then with ~5 catalogue writes a second in another profile, against a server already
 * running at BASE (start it yourself, e.g. `node --cpu-prof dist/service-auth.mjs`).
 *
 *   BASE=http://127.0.0.1:3000 ADMIN_TOKEN=... CATALOGUE_CREDENTIALS=20000 WRITES=1 npx tsx bench/catalogue-profile.ts
 */
import autocannon from "autocannon"
import { catalogueCredential, ENVIRONMENT, PROFILE } from "./provision-catalogue.js"

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

const bodies = Array.from({ length: credentials }, (_, i) => {
  const { clientId, secret, uuid } = catalogueCredential(seed, i)
  return new URLSearchParams({
    grant_type: "client_credentials",
    client_id: clientId,
    client_secret: secret,
    profile: PROFILE,
    environment: ENVIRONMENT,
    service_uuid: uuid
  }).toString()
})

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
  const other = `writes-${crypto.randomUUID().slice(0, 8)}`
  await admin("PUT", `/admin/profiles/${other}`)
  await admin("PUT", `/admin/profiles/${other}/environments/${ENVIRONMENT}`)
  let writing = writes
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
    `tokens spread${writes ? " with writes" : ""}: ${measured.rps.toFixed(0)}/s, ${measured.failed} failed; ` +
      `${(done / ((performance.now() - at) / 1000)).toFixed(1)} writes/s`
  )
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
