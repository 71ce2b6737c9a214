/**
 * LOG_FORMAT=json: every line the server writes is one JSON object with `time`, `level` and
 * `message`; each request's line (LOG_LEVEL=debug) carries a request id, the method, the route
 * template (never the raw path), the status, the duration and the client address. No secret, token or client secret
 * is ever in it. The real server (`npm start`) on an embedded database.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")

describe("LOG_FORMAT=json", () => {
  let server: ServerProcess
  const dir = mkdtempSync(join(tmpdir(), "json-logs-"))

  beforeAll(async () => {
    server = await startServer({
      ADMIN_TOKEN,
      DATA_DIR: join(dir, "data"),
      LOG_FORMAT: "json",
      LOG_LEVEL: "debug",
      // The test's requests come from 127.0.0.1, here a proxy: a forwarded client shows in the log.
      TRUSTED_PROXIES: "127.0.0.1"
    })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const admin = (method: string, path: string, body?: unknown) => adminJson(server.base, ADMIN_TOKEN, method, path, body)

  it("writes one JSON object per line, with request fields and no secret", async () => {
    const profile = `logs-${randomBytes(4).toString("hex")}`
    await admin("PUT", `/admin/profiles/${profile}`)
    await admin("PUT", `/admin/profiles/${profile}/environments/prod`)
    const service = await admin("POST", `/admin/profiles/${profile}/environments/prod/services`, { auth_type: "oauth" })
    const credential = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${service.uuid}/credentials`)
    const token = await (await fetch(`${server.base}/oauth/token?client_secret=${credential.client_secret}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: credential.client_id,
        client_secret: credential.client_secret,
        profile,
        environment: "prod",
        service_uuid: service.uuid
      })
    })).json() as { access_token: string }
    const call = await fetch(`${server.base}/service/${profile}/prod/json/${service.uuid}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token.access_token}`,
        "content-type": "application/json",
        "x-forwarded-for": "203.0.113.40"
      },
      body: JSON.stringify({ hello: "world" })
    })
    expect(call.status).toBe(200)
    // Refusals name the path too: none of them may bring it into the log.
    const refusals = await Promise.all([
      fetch(`${server.base}/admin/profiles/${profile}-missing`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      fetch(`${server.base}/admin/profiles/${profile}`),
      fetch(`${server.base}/service/${profile}/prod/json/${service.uuid}`, { method: "POST", body: "{}" }),
      fetch(`${server.base}/service/${profile}/prod/json/${service.uuid}`),
      fetch(`${server.base}/nowhere/${profile}`)
    ])
    expect(refusals.map((response) => response.status)).toEqual([404, 401, 401, 405, 404])
    // Each answer's line is written as it is answered: give the last ones a moment to reach the pipe.
    const lineCount = () => server.log().split("\n").filter((line) => line.includes("\"request_id\"")).length
    for (const deadline = Date.now() + 5_000; lineCount() < 11 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    // The service call's line is the last one written (whole lines only), however slow the machine.
    const logged = () => server.log().includes("/service/{profile}/{environment}/json/{uuid}") && server.log().endsWith("\n")
    for (const deadline = Date.now() + 15_000; !logged() && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }

    const lines = server.log().split("\n").filter((line) => line.trim() !== "")
    expect(lines.length).toBeGreaterThan(5)
    const entries = lines.map((line) => {
      const entry = JSON.parse(line) as Record<string, unknown>
      expect(entry, line).toMatchObject({ time: expect.any(String), level: expect.any(String), message: expect.any(String) })
      expect(Number.isNaN(Date.parse(entry.time as string)), line).toBe(false)
      return entry
    })

    const requests = entries.filter((entry) => typeof entry.request_id === "string")
    const tokenLine = requests.find((entry) => entry.route === "/oauth/token")
    expect(tokenLine).toMatchObject({
      method: "POST",
      status: 200,
      duration_ms: expect.any(Number),
      level: "DEBUG",
      client_address: "127.0.0.1"
    })
    expect(requests.find((entry) => entry.route === "/service/{profile}/{environment}/json/{uuid}")).toMatchObject({
      status: 200,
      client_address: "203.0.113.40"
    })
    expect(requests.find((entry) => entry.route === "/admin/profiles/{profile}")).toMatchObject({ method: "PUT" })
    expect(new Set(requests.map((entry) => entry.request_id)).size).toBe(requests.length)
    // Routes are templates: no profile name or uuid a client sent is a route, nor in any line at all
    // (the message names the route too).
    for (const entry of requests) {
      expect(String(entry.route)).not.toContain(profile)
      expect(String(entry.route)).not.toContain(service.uuid)
      expect(entry.message).toBe(`${entry.method} ${entry.route} ${entry.status} ${entry.duration_ms}ms`)
    }
    expect(server.log()).not.toContain(profile)
    expect(server.log()).not.toContain(service.uuid)

    const text = server.log()
    for (const secret of [ADMIN_TOKEN, credential.client_secret, token.access_token, token.access_token.split(".")[2]!]) {
      expect(text).not.toContain(secret)
    }
  }, 120_000)

  it("says at shutdown how many requests it drained and how long that took", async () => {
    expect(await server.stop()).toBe(0)
    const shutdown = server.log().split("\n").filter((line) => line.includes("shutdown:")).map((line) => JSON.parse(line))
    expect(shutdown).toEqual([
      expect.objectContaining({
        level: "INFO",
        message: expect.stringMatching(/^shutdown: stopped accepting connections; drained \d+ requests? in \d+ ms$/),
        requests_drained: expect.any(Number),
        requests_cut: 0,
        duration_ms: expect.any(Number)
      })
    ])
  }, 60_000)
})
