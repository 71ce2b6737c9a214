/**
 * The fast lane and the HttpApi app make the same spans for the same request: one server span a
 * token request, one an echo call, two a proxied call (the server span and the upstream call's),
 * with the same names, kinds, attributes and events. One real server exporting to an OTLP sink; each
 * request is sent twice, with a declared length (the fast lane answers) and chunked (the app
 * answers), each in a trace of its own, and the two traces compared.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { adminJson } from "./support/AdminFetch.js"
import { rawRequest } from "./support/Http.js"
import { type ExportedSpan, type OtlpSink, startOtlpSink, waitFor } from "./support/OtlpSink.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const dirs: Array<string> = []
let sink: OtlpSink
let server: ServerProcess
let setup: { profile: string; echo: string; proxy: string; form: string; token: string }

beforeAll(async () => {
  sink = await startOtlpSink()
  const dir = mkdtempSync(join(tmpdir(), "lane-trace-"))
  dirs.push(dir)
  const keyFile = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })
  server = await startServer({
    ADMIN_TOKEN,
    DATA_DIR: join(dir, "data"),
    SIGNING_KEY_FILE: keyFile,
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "100",
    TRUSTED_PROXIES: "127.0.0.1"
  })
  const admin = (method: string, path: string, body?: unknown) => adminJson(server.base, ADMIN_TOKEN, method, path, body)
  const profile = "lanes"
  await admin("PUT", `/admin/profiles/${profile}`)
  await admin("PUT", `/admin/profiles/${profile}/environments/prod`)
  const services = `/admin/profiles/${profile}/environments/prod/services`
  const echo = (await admin("POST", services, { auth_type: "oauth" })).uuid as string
  const proxy = (await admin("POST", services, { auth_type: "oauth", handler: { type: "proxy", url: `${sink.endpoint}/upstream` } }))
    .uuid as string
  const echoCredential = await admin("POST", `${services}/${echo}/credentials`)
  const proxyCredential = await admin("POST", `${services}/${proxy}/credentials`)
  const formOf = (credential: { client_id: string; client_secret: string }, uuid: string) =>
    new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile,
      environment: "prod",
      service_uuid: uuid
    }).toString()
  const tokenOf = async (form: string) => {
    const answer = await rawRequest(server.port, {
      method: "POST",
      path: "/oauth/token",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form
    })
    expect(answer.status).toBe(200)
    return JSON.parse(answer.text).access_token as string
  }
  const form = formOf(echoCredential, echo)
  setup = { profile, echo, proxy, form, token: await tokenOf(form) }
  ;(setup as { proxyToken?: string }).proxyToken = await tokenOf(formOf(proxyCredential, proxy))
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await sink?.close()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** The request, sent by the fast lane's rules (declared length) or the app's (chunked), in a new sampled trace. */
const send = async (chunked: boolean, path: string, headers: Record<string, string>, body: string) => {
  const traceId = randomBytes(16).toString("hex")
  const answer = await rawRequest(server.port, {
    method: "POST",
    path,
    headers: { ...headers, traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01`, "x-forwarded-for": "198.51.100.7" },
    body,
    chunked
  })
  expect(answer.status).toBe(200)
  return traceId
}

/** A trace's spans, without what differs by construction: ids, times and durations. */
const shapeOf = (spans: ReadonlyArray<ExportedSpan>) =>
  spans.map((span) => ({
    name: span.name,
    kind: span.kind,
    parent: span.parentSpanId === undefined ? "none" : spans.find((s) => s.spanId === span.parentSpanId)?.name ?? "caller",
    attributes: span.attributes,
    events: span.events.map((e) => ({ name: e.name, attributes: { ...e.attributes, duration_ms: undefined } }))
  })).sort((a, b) => a.name.localeCompare(b.name))

const traceOf = (traceId: string, count: number) =>
  waitFor(`${count} spans of trace ${traceId}`, () => {
    const spans = sink.spans().filter((s) => s.traceId === traceId)
    return spans.length >= count ? spans : undefined
  })

const bothEntries = async (path: string, headers: Record<string, string>, body: string, count: number) => {
  const lane = await traceOf(await send(false, path, headers, body), count)
  const app = await traceOf(await send(true, path, headers, body), count)
  expect(lane).toHaveLength(count)
  expect(app).toHaveLength(count)
  expect(shapeOf(lane)).toEqual(shapeOf(app))
  return lane
}

describe("the fast lane's spans are the app's", () => {
  it("a token request: one server span, with the grant's attributes and the cache's event", async () => {
    const [span] = await bothEntries("/oauth/token", { "content-type": "application/x-www-form-urlencoded" }, setup.form, 1)
    expect(span).toMatchObject({
      name: "POST /oauth/token",
      kind: 2,
      attributes: {
        "http.request.method": "POST",
        "http.route": "/oauth/token",
        "url.path": "/oauth/token",
        "url.scheme": "http",
        "client.address": "198.51.100.7",
        "service_auth.profile": setup.profile,
        "service_auth.service_uuid": setup.echo,
        "jwt.alg": "RS256",
        "http.response.status_code": 200
      }
    })
    expect(span!.events.map((e) => e.name)).toEqual(["CredentialRepoCache.findTokenTarget"])
  })

  it("an echo call: one server span, with the handler", async () => {
    const path = `/service/${setup.profile}/prod/json/${setup.echo}`
    const [span] = await bothEntries(path, { authorization: `Bearer ${setup.token}`, "content-type": "application/json" }, "{}", 1)
    expect(span).toMatchObject({
      name: "POST /service/{profile}/{environment}/json/{uuid}",
      attributes: { "service_auth.handler.configured": "echo", "url.path": path, "http.response.status_code": 200 }
    })
  })

  it("a proxied call: the server span and the upstream call's, whose ids the upstream receives", async () => {
    const path = `/service/${setup.profile}/prod/json/${setup.proxy}`
    const token = (setup as { proxyToken?: string }).proxyToken!
    const spans = await bothEntries(path, { authorization: `Bearer ${token}`, "content-type": "application/json" }, "{}", 2)
    const upstream = spans.find((s) => s.name === "ServiceHandlers.proxy")!
    expect(upstream.kind).toBe(3)
    expect(upstream.parentSpanId).toBe(spans.find((s) => s.kind === 2)!.spanId)
    const calls = sink.received.filter((e) => e.path === "/upstream")
    expect(calls.map((e) => e.headers["traceparent"])).toContain(`00-${upstream.traceId}-${upstream.spanId}-01`)
  })
})
