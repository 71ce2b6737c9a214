/**
 * `GET /metrics`: the real server (`npm start`, embedded database), so that requests the fast lane
 * answers and requests the app answers are both counted. Counter deltas must equal the traffic sent
 * exactly; labels hold route templates and result codes, never a raw path, name or secret; the
 * exposition is well formed; METRICS_TOKEN guards it. A second, in-process server shows /metrics
 * open when no token is configured.
 */
import { HttpClient } from "@effect/platform"
import { describe, expect, it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, it } from "vitest"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { makeTestServer } from "../src/testing.js"
import { adminJson } from "./support/AdminFetch.js"
import { rawRequest } from "./support/Http.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const METRICS_TOKEN = randomBytes(24).toString("base64url")

/** `name{labels}` → value, with every sample checked to belong to a family declared by HELP and TYPE. */
const parseExposition = (text: string) => {
  const samples = new Map<string, number>()
  const types = new Map<string, string>()
  const helped = new Set<string>()
  for (const line of text.split("\n")) {
    if (line === "") continue
    const help = /^# HELP (\S+) .+$/.exec(line)
    if (help !== null) {
      helped.add(help[1]!)
      continue
    }
    const type = /^# TYPE (\S+) (counter|gauge|histogram)$/.exec(line)
    if (type !== null) {
      types.set(type[1]!, type[2]!)
      continue
    }
    // Label values may hold braces (route templates): only quoted strings end at their closing quote.
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$/.exec(line)
    if (sample === null) throw new Error(`not an exposition line: ${line}`)
    const family = sample[1]!.replace(/_(bucket|sum|count)$/, "")
    const declared = types.has(sample[1]!) ? sample[1]! : family
    if (!types.has(declared) || !helped.has(declared)) throw new Error(`sample of an undeclared family: ${line}`)
    samples.set(`${sample[1]}${sample[2] ?? ""}`, Number(sample[3] === "+Inf" ? Infinity : sample[3]))
  }
  return { samples, types }
}

describe("GET /metrics on the real server", () => {
  let server: ServerProcess
  const dir = mkdtempSync(join(tmpdir(), "metrics-"))
  const profile = `metrics-${randomBytes(4).toString("hex")}`
  let uuid = ""
  let credential = { client_id: "", client_secret: "" }

  const admin = (method: string, path: string, body?: unknown) => adminJson(server.base, ADMIN_TOKEN, method, path, body)

  const token = (fields: Record<string, string>) =>
    fetch(`${server.base}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fields)
    })

  const grant = (secret = credential.client_secret) =>
    token({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: secret,
      profile,
      environment: "prod",
      service_uuid: uuid
    })

  const call = (accessToken: string | undefined, body = "{}", path = `/service/${profile}/prod/json/${uuid}`) =>
    fetch(`${server.base}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(accessToken === undefined ? {} : { authorization: `Bearer ${accessToken}` })
      },
      body
    })

  const scrape = async () => {
    const response = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const text = await response.text()
    return { text, ...parseExposition(text) }
  }

  beforeAll(async () => {
    server = await startServer({ ADMIN_TOKEN, METRICS_TOKEN, DATA_DIR: join(dir, "data") })
    await admin("PUT", `/admin/profiles/${profile}`)
    await admin("PUT", `/admin/profiles/${profile}/environments/prod`)
    uuid = (await admin("POST", `/admin/profiles/${profile}/environments/prod/services`, { auth_type: "oauth" })).uuid
    credential = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials`)
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("requires METRICS_TOKEN as a Bearer token when it is set", async () => {
    for (const authorization of [undefined, "Bearer wrong-token", `Basic ${METRICS_TOKEN}`, `Bearer ${ADMIN_TOKEN}`]) {
      const response = await fetch(`${server.base}/metrics`, authorization === undefined ? {} : { headers: { authorization } })
      expect(response.status).toBe(401)
      expect(response.headers.get("www-authenticate")).toBe(`Bearer realm="metrics"`)
      const body = await response.json()
      expect(Object.keys(body).sort()).toEqual(["error", "error_description"])
      expect(body.error).toBe("unauthorized")
    }
  })

  it("counts token requests, service calls and durations exactly, on both the fast and the slow path", async () => {
    // The first grant records last_used_at (the app's path); later ones are the fast lane's.
    const first = await (await grant()).json()
    expect(first.access_token).toBeTypeOf("string")
    const before = await scrape()

    const issued: Array<string> = []
    for (let i = 0; i < 5; i++) issued.push((await (await grant()).json()).access_token)
    expect((await grant("wrong-secret")).status).toBe(401)
    expect((await token({ grant_type: "client_credentials" })).status).toBe(400)
    expect((await token({ grant_type: "password" })).status).toBe(400)
    expect((await token({})).status).toBe(400)
    for (let i = 0; i < 4; i++) expect((await call(issued[i])).status).toBe(200)
    expect((await call(undefined)).status).toBe(401)
    expect((await call(issued[0], "[1]")).status).toBe(400)
    expect((await call(issued[0], "{}", `/service/${profile}/prod/json/00000000-0000-4000-8000-000000000000`)).status).toBe(404)
    expect((await fetch(`${server.base}/no/such/${profile}`)).status).toBe(404)

    const after = await scrape()
    const delta = (key: string) => (after.samples.get(key) ?? 0) - (before.samples.get(key) ?? 0)
    expect(delta(`service_auth_token_requests_total{result="issued"}`)).toBe(5)
    expect(delta(`service_auth_token_requests_total{result="invalid_client"}`)).toBe(1)
    expect(delta(`service_auth_token_requests_total{result="invalid_request"}`)).toBe(2)
    expect(delta(`service_auth_token_requests_total{result="unsupported_grant_type"}`)).toBe(1)
    expect(delta(`service_auth_service_calls_total{status="200"}`)).toBe(4)
    expect(delta(`service_auth_service_calls_total{status="401"}`)).toBe(1)
    expect(delta(`service_auth_service_calls_total{status="400"}`)).toBe(1)
    expect(delta(`service_auth_service_calls_total{status="404"}`)).toBe(1)
    expect(delta(`service_auth_http_request_duration_seconds_count{route="/oauth/token"}`)).toBe(9)
    expect(delta(`service_auth_http_request_duration_seconds_count{route="/service/{profile}/{environment}/json/{uuid}"}`))
      .toBe(7)
    expect(delta(`service_auth_http_request_duration_seconds_count{route="unmatched"}`)).toBe(1)
    // The scrape before this one is itself a request, recorded once answered.
    expect(delta(`service_auth_http_request_duration_seconds_count{route="/metrics"}`)).toBe(1)

    // No raw path, name, client id, secret or token in any label or value.
    for (const secret of [profile, uuid, credential.client_id, credential.client_secret, issued[0]!, METRICS_TOKEN, ADMIN_TOKEN]) {
      expect(after.text).not.toContain(secret)
    }
  })

  it("labels token requests the app answers by the decision's result, as the fast lane does", async () => {
    // A chunked body is never the fast lane's: these are the HttpApi handler's.
    const chunkedToken = (fields: Record<string, string>) =>
      rawRequest(Number(new URL(server.base).port), {
        method: "POST",
        path: "/oauth/token",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(fields).toString(),
        chunked: true
      })
    const fields = { grant_type: "client_credentials", client_id: credential.client_id, profile, environment: "prod", service_uuid: uuid }
    const before = await scrape()
    expect((await chunkedToken({ ...fields, client_secret: credential.client_secret })).status).toBe(200)
    expect((await chunkedToken({ ...fields, client_secret: "wrong-secret" })).status).toBe(401)
    expect((await chunkedToken({ grant_type: "client_credentials" })).status).toBe(400)
    expect((await chunkedToken({ grant_type: "password" })).status).toBe(400)
    // Over the body limit: refused before the decision, labelled by the refusal's code.
    expect((await chunkedToken({ ...fields, client_secret: "x".repeat(1_100_000) })).status).toBe(413)
    const after = await scrape()
    const delta = (key: string) => (after.samples.get(key) ?? 0) - (before.samples.get(key) ?? 0)
    expect(delta(`service_auth_token_requests_total{result="issued"}`)).toBe(1)
    expect(delta(`service_auth_token_requests_total{result="invalid_client"}`)).toBe(1)
    expect(delta(`service_auth_token_requests_total{result="invalid_request"}`)).toBe(2)
    expect(delta(`service_auth_token_requests_total{result="unsupported_grant_type"}`)).toBe(1)
    expect(delta(`service_auth_http_request_duration_seconds_count{route="/oauth/token"}`)).toBe(5)
  })

  it("writes well-formed histograms: cumulative buckets ending at +Inf equal to the count", async () => {
    const { samples, types } = await scrape()
    expect(types.get("service_auth_http_request_duration_seconds")).toBe("histogram")
    const route = `route="/oauth/token"`
    const buckets = [...samples].filter(([key]) =>
      key.startsWith("service_auth_http_request_duration_seconds_bucket{") && key.includes(route)
    )
    expect(buckets.length).toBeGreaterThan(5)
    const counts = buckets.map(([, value]) => value)
    expect(counts).toEqual([...counts].sort((a, b) => a - b))
    expect(buckets.at(-1)![0]).toContain(`le="+Inf"`)
    expect(counts.at(-1)).toBe(samples.get(`service_auth_http_request_duration_seconds_count{${route}}`))
    expect(samples.get(`service_auth_http_request_duration_seconds_sum{${route}}`)).toBeGreaterThan(0)
  })

  it("shows the catalogue's size and the process's memory and event loop", async () => {
    const { samples, types } = await scrape()
    expect(samples.get("service_auth_profiles")).toBe(1)
    expect(samples.get("service_auth_environments")).toBe(1)
    expect(samples.get("service_auth_services")).toBe(1)
    expect(samples.get("service_auth_credentials")).toBe(1)
    expect(types.get("service_auth_credentials")).toBe("gauge")
    expect(samples.get("process_resident_memory_bytes")).toBeGreaterThan(10_000_000)
    expect(samples.get("nodejs_heap_size_used_bytes")).toBeGreaterThan(0)
    expect(samples.get("process_cpu_user_seconds_total")).toBeGreaterThan(0)
    expect(types.get("process_cpu_user_seconds_total")).toBe("counter")
    expect(samples.has("nodejs_eventloop_lag_p99_seconds")).toBe(true)
    expect(samples.get("nodejs_eventloop_utilization_ratio")).toBeGreaterThanOrEqual(0)

    const second = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials`)
    expect((await scrape()).samples.get("service_auth_credentials")).toBe(2)
    await fetch(`${server.base}/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials/${second.client_id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
    })
    expect((await scrape()).samples.get("service_auth_credentials")).toBe(1)
  })
})

describe("GET /metrics without METRICS_TOKEN", () => {
  effectIt.layer(makeTestServer())((it) => {
    it.effect("is open, and answers only GET and HEAD", () =>
      Effect.gen(function*() {
        const client = yield* HttpClient.HttpClient
        const open = yield* client.get("/metrics")
        expect(open.status).toBe(200)
        expect(yield* open.text).toContain("# TYPE service_auth_token_requests_total counter")
        const post = yield* client.post("/metrics")
        expect(post.status).toBe(405)
        expect(post.headers["allow"]).toBe("GET, HEAD")
      }))
  })
})
