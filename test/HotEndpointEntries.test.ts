/**
 * The hot endpoints' two entries (the fast lane for a body of declared length, the HttpApi app for
 * a chunked one) hand the request to one execution each, which records it: one server span with the
 * same spans below it, and one debug line, whichever entry read it. A real server (`npm start`,
 * embedded database, LOG_LEVEL=debug) exporting its traces to a receiver in this test.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { adminJson } from "./support/AdminFetch.js"
import { type RawRequest, rawRequest } from "./support/Http.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
}

/** An OTLP/HTTP JSON receiver: the spans of every export POSTed to it. */
const startReceiver = async () => {
  const spans: Array<Span> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      if (request.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        for (const resource of body.resourceSpans ?? []) {
          for (const scope of resource.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({ traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId || undefined, name: span.name })
            }
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" })
      response.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return { endpoint: `http://127.0.0.1:${port}`, spans, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** A trace's spans as "parent > child" names, sorted: its shape, whatever the ids. */
const shapeOf = (spans: ReadonlyArray<Span>, traceId: string) => {
  const mine = spans.filter((span) => span.traceId === traceId)
  const names = new Map(mine.map((span) => [span.spanId, span.name]))
  return mine.map((span) => `${names.get(span.parentSpanId ?? "") ?? "(caller)"} > ${span.name}`).sort()
}

const dirs: Array<string> = []
let receiver: Awaited<ReturnType<typeof startReceiver>>
let server: ServerProcess

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "hot-entries-"))
  dirs.push(dir)
  const keyFile = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })
  receiver = await startReceiver()
  const noOtel = Object.fromEntries(Object.keys(process.env).filter((name) => name.startsWith("OTEL_")).map((name) => [name, ""]))
  server = await startServer({
    ...noOtel,
    ADMIN_TOKEN,
    SIGNING_KEY_FILE: keyFile,
    DATA_DIR: join(dir, "data"),
    LOG_LEVEL: "debug",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "100"
  })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await receiver?.close()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe("one execution per hot endpoint, whichever entry reads the request", () => {
  it("the same spans under one server span, and one debug line, for a token request and a service call", async () => {
    const admin = (method: string, path: string, body?: unknown) => adminJson(server.base, ADMIN_TOKEN, method, path, body)
    await admin("PUT", "/admin/profiles/entries")
    await admin("PUT", "/admin/profiles/entries/environments/prod")
    const service = await admin("POST", "/admin/profiles/entries/environments/prod/services", { auth_type: "oauth" })
    const credential = await admin("POST", `/admin/profiles/entries/environments/prod/services/${service.uuid}/credentials`)
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile: "entries",
      environment: "prod",
      service_uuid: service.uuid
    }).toString()
    const tokenRequest = (headers: Record<string, string> = {}): RawRequest => ({
      method: "POST",
      path: "/oauth/token",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: form
    })
    // Untraced first requests: the catalogue cached, `last_used_at` recorded for the minute, so the
    // traced ones below take the same way through the execution.
    const first = await rawRequest(server.port, tokenRequest())
    expect(first.status).toBe(200)
    expect((await rawRequest(server.port, tokenRequest())).status).toBe(200)
    const token = JSON.parse(first.text).access_token as string
    const callRequest = (headers: Record<string, string> = {}): RawRequest => ({
      method: "POST",
      path: `/service/entries/prod/json/${service.uuid}`,
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, ...headers },
      body: `{"amount":42}`
    })
    expect((await rawRequest(server.port, callRequest())).status).toBe(200)

    const traced = (request: (headers: Record<string, string>) => RawRequest, chunked: boolean) => {
      const traceId = randomBytes(16).toString("hex")
      const headers = { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` }
      return { traceId, answer: rawRequest(server.port, { ...request(headers), chunked }) }
    }
    const sent = {
      laneToken: traced(tokenRequest, false),
      appToken: traced(tokenRequest, true),
      laneCall: traced(callRequest, false),
      appCall: traced(callRequest, true)
    }
    for (const { answer } of Object.values(sent)) expect((await answer).status).toBe(200)

    // A server span ends last: once all four are in, so is everything below them.
    const serverSpans = () => receiver.spans.filter((span) => span.name.startsWith("POST "))
    const deadline = Date.now() + 15_000
    while (Object.values(sent).some(({ traceId }) => !serverSpans().some((span) => span.traceId === traceId))) {
      if (Date.now() > deadline) throw new Error(`spans not exported: ${JSON.stringify(receiver.spans.map((span) => span.name))}`)
      await sleep(100)
    }
    await sleep(500)

    const shapes = Object.fromEntries(Object.entries(sent).map(([name, { traceId }]) => [name, shapeOf(receiver.spans, traceId)]))
    expect(shapes.appToken).toEqual(shapes.laneToken)
    expect(shapes.appCall).toEqual(shapes.laneCall)
    expect(shapes.laneToken!.filter((edge) => edge === "(caller) > POST /oauth/token")).toHaveLength(1)
    expect(shapes.laneToken!.filter((edge) => edge.startsWith("(caller) >"))).toHaveLength(1)
    expect(shapes.laneCall!.filter((edge) => edge === "(caller) > POST /service/{profile}/{environment}/json/{uuid}")).toHaveLength(1)
    expect(shapes.laneCall!.filter((edge) => edge.startsWith("(caller) >"))).toHaveLength(1)

    // One debug line a request: 2 + 2 token requests, 1 + 2 service calls.
    const lines = server.log().split("\n")
    expect(lines.filter((line) => line.includes("POST /oauth/token 200 "))).toHaveLength(4)
    expect(lines.filter((line) => line.includes("POST /service/{profile}/{environment}/json/{uuid} 200 "))).toHaveLength(3)
  }, 60_000)
})
