/**
 * Credential expiry through real `npm start` processes: a credential created a few
 * seconds from expiry works, then, when the time passes, is refused on two instances sharing one
 * PostgreSQL database at once (no event between them: each compares `expires_at` with its clock),
 * and on the embedded database; `credential.expired` is audited exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type ServerProcess, startServer, twoInstances } from "./support/ServerProcess.js"
import { adminFetch } from "./support/AdminFetch.js"

const DATABASE_URL = process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const LIFETIME_MS = 4_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A service with a credential that expires `LIFETIME_MS` from now, made through `server`. */
const expiringCredential = async (server: ServerProcess) => {
  const profile = `expiry-${randomBytes(6).toString("hex")}`
  const call = (method: string, path: string, body?: unknown) => adminFetch(server.base, ADMIN_TOKEN, method, path, body)
  await call("PUT", `/admin/profiles/${profile}`)
  await call("PUT", `/admin/profiles/${profile}/environments/prod`)
  const service = await call("POST", `/admin/profiles/${profile}/environments/prod/services`, { name: "billing", auth_type: "oauth" })
  const expiresAt = Date.now() + LIFETIME_MS
  const credential = await call("POST", `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}/credentials`, {
    expires_at: new Date(expiresAt).toISOString()
  })
  expect(credential.status).toBe(201)
  return {
    profile,
    expiresAt,
    callPath: `/service/${profile}/prod/json/${service.body.uuid}`,
    fields: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.body.client_id,
      client_secret: credential.body.client_secret,
      profile,
      environment: "prod",
      service_uuid: service.body.uuid
    }).toString()
  }
}

const tokenRequest = (server: ServerProcess, fields: string) =>
  fetch(`${server.base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: fields
  })

const callService = (server: ServerProcess, path: string, token: string) =>
  fetch(`${server.base}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: "{}"
  })

/** The profile's `credential.expired` events, once the sweeps (every second) have had their time. */
const expiredEvents = async (server: ServerProcess, profile: string) => {
  const page = await adminFetch(server.base, ADMIN_TOKEN, "GET", `/admin/audit?profile=${profile}`)
  return page.body.events.filter((event: { action: string }) => event.action === "credential.expired")
}

/** Works before `expiresAt` on every server, refused as deleted on every server after it, audited once. */
const expiresEverywhere = async (servers: ReadonlyArray<ServerProcess>) => {
  const credential = await expiringCredential(servers[0]!)
  const issued = await tokenRequest(servers[0]!, credential.fields)
  expect(issued.status).toBe(200)
  const { access_token: token } = await issued.json() as { access_token: string }
  for (const server of servers) expect((await callService(server, credential.callPath, token)).status).toBe(200)

  await sleep(Math.max(credential.expiresAt - Date.now(), 0) + 50)
  for (const server of servers) {
    const refused = await tokenRequest(server, credential.fields)
    expect(refused.status).toBe(401)
    expect(await refused.json()).toEqual({ error: "invalid_client", error_description: "Invalid client credentials" })
    const call = await callService(server, credential.callPath, token)
    expect(call.status).toBe(401)
    expect(call.headers.get("www-authenticate")).toBe(`Bearer realm="service", error="invalid_token"`)
    expect((await call.json()).error).toBe("invalid_token")
  }

  // Every instance sweeps every second; after three, the event is there, once.
  await sleep(3_000)
  const events = await expiredEvents(servers[servers.length - 1]!, credential.profile)
  expect(events).toHaveLength(1)
  expect(events[0]).toMatchObject({ actor: "credential-expiry", source: "server", action: "credential.expired" })
}

describe.skipIf(DATABASE_URL === undefined)("credential expiry on two instances on one PostgreSQL database", () => {
  const instances = twoInstances(() => ({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN }))

  it(
    "a short lifetime: refused on both instances at once when the time passes, audited once",
    () => expiresEverywhere([instances.first, instances.second]),
    60_000
  )
})

describe("credential expiry on the embedded database", () => {
  let server: ServerProcess
  const dataDir = mkdtempSync(join(tmpdir(), "service-auth-expiry-"))

  beforeAll(async () => {
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("a short lifetime: refused when the time passes, audited once", () => expiresEverywhere([server]), 60_000)
})
