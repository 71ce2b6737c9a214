/**
 * Traces over OTLP/HTTP: the real server (`npm start`, embedded database) exporting to a receiver
 * in this test, which collects what is POSTed to /v1/traces. With OTEL_EXPORTER_OTLP_ENDPOINT set,
 * the spans of the token grant, the service call, storage and the cache arrive with `service.name`
 * `service-auth`, continue the caller's `traceparent`, and carry no secret; without it nothing is
 * sent. A bad protocol or endpoint stops the start with one line; a dead collector slows nothing.
 */
import { spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every OTLP variable cleared, whatever the environment running the tests holds. */
const NO_OTEL = Object.fromEntries(
  Object.keys(process.env).filter((name) => name.startsWith("OTEL_")).map((name) => [name, ""])
)

interface Export {
  readonly path: string
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

/** An OTLP/HTTP receiver: keeps every POST, answers 200 in the request's own encoding. */
const startReceiver = async () => {
  const exports: Array<Export> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      exports.push({ path: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks) })
      const json = request.headers["content-type"] === "application/json"
      response.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" })
      response.end(json ? "{}" : undefined)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    endpoint: `http://127.0.0.1:${port}`,
    exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Record<string, unknown> }>
  readonly resource: Record<string, unknown>
}

type OtlpAttribute = { readonly key: string; readonly value: Record<string, unknown> }
const attributesOf = (list: ReadonlyArray<OtlpAttribute> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, Object.values(value)[0]]))

/** The spans of every JSON export received so far. */
const spansOf = (receiver: Receiver): Array<Span> =>
  receiver.exports.filter((e) => e.path === "/v1/traces").flatMap((e) =>
    (JSON.parse(e.body.toString("utf8")).resourceSpans as Array<any>).flatMap((resourceSpans) =>
      (resourceSpans.scopeSpans as Array<any>).flatMap((scopeSpans) =>
        (scopeSpans.spans as Array<any>).map((span) => ({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId,
          name: span.name,
          kind: span.kind,
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((event: any) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
          resource: attributesOf(resourceSpans.resource?.attributes)
        }))
      )
    )
  )

const waitFor = async <A>(what: string, check: () => A | undefined, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = check()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

const dirs: Array<string> = []
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "traces-"))
  dirs.push(dir)
  return join(dir, "data")
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

/**
 * Every server here signs with this key: generating one on a fresh data directory takes longer than
 * the storage timeout allows when the machine is loaded, which is not what these tests are about.
 */
const SIGNING_KEY_FILE = (() => {
  const dir = mkdtempSync(join(tmpdir(), "traces-key-"))
  dirs.push(dir)
  const file = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(file, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })
  return file
})()

/** Settings every server here starts with. */
const serverSettings = () => ({ ...NO_OTEL, ADMIN_TOKEN, SIGNING_KEY_FILE, DATA_DIR: dataDir() })

/** A service with a credential, a token for it (sent with `tokenHeaders`), and one call of it. */
const tokenAndCall = async (base: string, tokenHeaders: Record<string, string> = {}, handler?: unknown) => {
  const admin = (method: string, path: string, body?: unknown) => adminJson(base, ADMIN_TOKEN, method, path, body)
  const profile = `tr-${randomBytes(4).toString("hex")}`
  await admin("PUT", `/admin/profiles/${profile}`)
  await admin("PUT", `/admin/profiles/${profile}/environments/prod`)
  const service = await admin("POST", `/admin/profiles/${profile}/environments/prod/services`, {
    auth_type: "oauth",
    ...(handler === undefined ? {} : { handler })
  })
  const credential = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${service.uuid}/credentials`)
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: credential.client_id,
    client_secret: credential.client_secret,
    profile,
    environment: "prod",
    service_uuid: service.uuid
  })
  // The secret in the query string too: the URL a span records must not hold it.
  const tokenResponse = await fetch(`${base}/oauth/token?client_secret=${credential.client_secret}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...tokenHeaders },
    body: form
  })
  expect(tokenResponse.status).toBe(200)
  const token = (await tokenResponse.json() as { access_token: string }).access_token
  const call = await fetch(`${base}/service/${profile}/prod/json/${service.uuid}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ amount: 42 })
  })
  expect(call.status).toBe(200)
  // The same request again: this time the cache answers.
  const again = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form
  })
  expect(again.status).toBe(200)
  return {
    profile,
    service,
    credential,
    form: form.toString(),
    token,
    again: (await again.json() as { access_token: string }).access_token
  }
}

describe("OTEL_EXPORTER_OTLP_ENDPOINT set (http/json, the default)", () => {
  let receiver: Receiver
  let server: ServerProcess

  beforeAll(async () => {
    receiver = await startReceiver()
    server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_HEADERS: "x-collector-key=collector-secret",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      // The test's requests come from 127.0.0.1, here a proxy: the spans show the forwarded client.
      TRUSTED_PROXIES: "127.0.0.1"
    })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
  })

  it("exports the grant, the service call, storage and the cache, continuing the caller's trace, with no secret", async () => {
    const traceId = randomBytes(16).toString("hex")
    const parentSpanId = randomBytes(8).toString("hex")
    const { credential, service, form, token, again } = await tokenAndCall(server.base, {
      traceparent: `00-${traceId}-${parentSpanId}-01`,
      "x-forwarded-for": "198.51.100.23, 127.0.0.1"
    })

    // The catalogue is in memory (loaded again as soon as an admin change evicts it), so a live
    // credential is a cache hit from its first use; what the catalogue does not hold is read from
    // storage: a client id it has never seen, in a trace of its own.
    const missTraceId = randomBytes(16).toString("hex")
    const unknown = new URLSearchParams(form)
    unknown.set("client_id", `svc_${randomBytes(16).toString("hex")}`)
    const refused = await fetch(`${server.base}/oauth/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        traceparent: `00-${missTraceId}-${randomBytes(8).toString("hex")}-01`
      },
      body: unknown
    })
    expect(refused.status).toBe(401)

    const SERVICE_SPAN = "POST /service/{profile}/{environment}/json/{uuid}"
    const spans = await waitFor("the spans of the token requests and the call", () => {
      const spans = spansOf(receiver)
      const hit = spans.some((s) => s.events.some((e) => e.attributes["cache.hit"] === true && e.name.endsWith("findTokenTarget")))
      const done = hit && spans.some((s) => s.traceId === traceId && s.name === "POST /oauth/token") &&
        spans.some((s) => s.traceId === missTraceId) && spans.some((s) => s.name === SERVICE_SPAN)
      return done ? spans : undefined
    })

    expect(receiver.exports[0]!.path).toBe("/v1/traces")
    expect(receiver.exports[0]!.headers["content-type"]).toBe("application/json")
    expect(receiver.exports[0]!.headers["x-collector-key"]).toBe("collector-secret")
    for (const span of spans) expect(span.resource["service.name"]).toBe("service-auth")

    // One span a token request: it continues the caller's trace, and carries what the grant did.
    const inTrace = spans.filter((s) => s.traceId === traceId)
    expect(inTrace.map((s) => s.name)).toEqual(["POST /oauth/token"])
    expect(inTrace[0]).toMatchObject({
      parentSpanId,
      kind: 2,
      attributes: {
        "http.request.method": "POST",
        "http.route": "/oauth/token",
        "http.response.status_code": 200,
        "client.address": "198.51.100.23",
        "service_auth.service_uuid": service.uuid,
        "service_auth.client_id": credential.client_id,
        "jwt.alg": "RS256"
      }
    })
    expect(inTrace[0]!.events.map((e) => e.name)).toContain("CredentialRepoCache.findTokenTarget")
    // The same request again: the cache answers it, an event with no storage below it.
    const hits = spans.filter((s) =>
      s.name === "POST /oauth/token" &&
      s.events.some((e) => e.name === "CredentialRepoCache.findTokenTarget" && e.attributes["cache.hit"] === true)
    )
    expect(hits.length).toBeGreaterThan(0)
    expect(hits[0]!.events).toEqual([{ name: "CredentialRepoCache.findTokenTarget", attributes: { "cache.hit": true } }])

    // The unknown client id is a miss: the cache's read and storage's (and its SQL) are events of the one span.
    const inMissTrace = spans.filter((s) => s.traceId === missTraceId)
    expect(inMissTrace.map((s) => s.name)).toEqual(["POST /oauth/token"])
    const missEvents = inMissTrace[0]!.events
    expect(missEvents.find((e) => e.name === "CredentialRepoCache.findTokenTarget")?.attributes).toMatchObject({
      "cache.hit": false,
      duration_ms: expect.any(Number)
    })
    expect(missEvents.map((e) => e.name)).toContain("CredentialRepo.findTokenTarget")
    expect(missEvents.find((e) => e.name === "sql.execute")?.attributes).toMatchObject({
      "db.query.text": expect.stringContaining("SELECT")
    })

    // One span an echo call, with its service, client, handler and the cache's answer.
    const call = spans.find((s) => s.name === SERVICE_SPAN)!
    expect(spans.filter((s) => s.traceId === call.traceId)).toHaveLength(1)
    expect(call).toMatchObject({
      kind: 2,
      attributes: {
        "service_auth.service_uuid": service.uuid,
        "service_auth.client_id": credential.client_id,
        "service_auth.handler.configured": "echo",
        "http.response.status_code": 200
      }
    })
    expect(call.events).toContainEqual({ name: "CredentialRepoCache.findServiceRoute", attributes: { "cache.hit": true } })

    // A proxy's upstream (the receiver again, answering {}) continues the trace of the call: two spans.
    const proxied = await tokenAndCall(server.base, {}, { type: "proxy", url: `${receiver.endpoint}/upstream?key=upstream-key` })
    const upstream = receiver.exports.find((e) => e.path.startsWith("/upstream"))!
    const proxySpan = await waitFor("the proxy's span", () =>
      spansOf(receiver).find((s) =>
        s.name === "ServiceHandlers.proxy" && s.attributes["http.response.status_code"] === 200
      ))
    expect(upstream.headers["traceparent"]).toBe(`00-${proxySpan.traceId}-${proxySpan.spanId}-01`)
    expect(proxySpan.kind).toBe(3)
    expect(proxySpan.attributes).toEqual({
      "http.request.method": "POST",
      "server.address": "127.0.0.1",
      "server.port": Number(new URL(receiver.endpoint).port),
      "http.response.status_code": 200
    })
    const proxiedCall = await waitFor("the spans of the proxied call", () =>
      spansOf(receiver).find((s) => s.name === SERVICE_SPAN && s.attributes["service_auth.service_uuid"] === proxied.service.uuid))
    expect(proxySpan.parentSpanId).toBe(proxiedCall.spanId)
    expect(proxiedCall.attributes["service_auth.handler.configured"]).toBe("proxy")
    expect(spansOf(receiver).filter((s) => s.traceId === proxiedCall.traceId)).toHaveLength(2)

    // Nothing secret anywhere in what was exported: not the client secret (sent in the form and the
    // query string), the tokens, the admin token, nor the exporter's own header.
    const payload = receiver.exports.filter((e) => e.path === "/v1/traces").map((e) => e.body.toString("utf8")).join("\n")
    for (const secret of [credential.client_secret, token, again, ADMIN_TOKEN, "collector-secret", "upstream-key"]) {
      expect(payload.includes(secret)).toBe(false)
    }
    expect(payload).not.toContain("client_secret=")
  })
})

describe("head sampling (OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0)", () => {
  it("a caller's sampled traceparent is honoured; new traces and unsampled callers export nothing", async () => {
    const receiver = await startReceiver()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0"
    })
    try {
      const { profile, service, form } = await tokenAndCall(server.base)
      const tokenWith = async (headers: Record<string, string>) => {
        const response = await fetch(`${server.base}/oauth/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
          body: form
        })
        expect(response.status).toBe(200)
        return (await response.json() as { access_token: string }).access_token
      }
      const unsampledTrace = randomBytes(16).toString("hex")
      await tokenWith({})
      await tokenWith({ traceparent: `00-${unsampledTrace}-${randomBytes(8).toString("hex")}-00` })
      const sampledTrace = randomBytes(16).toString("hex")
      const token = await tokenWith({ traceparent: `00-${sampledTrace}-${randomBytes(8).toString("hex")}-01` })
      const call = await fetch(`${server.base}/service/${profile}/prod/json/${service.uuid}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          traceparent: `00-${sampledTrace}-${randomBytes(8).toString("hex")}-01`
        },
        body: "{}"
      })
      expect(call.status).toBe(200)

      // A proxy's upstream continues the trace unsampled (W3C): a new trace when the caller sent
      // none, the caller's own trace id when it sent one, flagged 00 either way, a span id of ours.
      const proxied = await tokenAndCall(server.base, {}, { type: "proxy", url: `${receiver.endpoint}/upstream` })
      const upstreamCalls = () => receiver.exports.filter((e) => e.path === "/upstream").map((e) => String(e.headers["traceparent"]))
      expect(upstreamCalls()).toEqual([expect.stringMatching(/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-00$/)])
      const callerSpanId = randomBytes(8).toString("hex")
      const proxiedCall = await fetch(`${server.base}/service/${proxied.profile}/prod/json/${proxied.service.uuid}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${proxied.token}`,
          "content-type": "application/json",
          traceparent: `00-${unsampledTrace}-${callerSpanId}-00`
        },
        body: "{}"
      })
      expect(proxiedCall.status).toBe(200)
      const continued = upstreamCalls()[1]!.split("-")
      expect(continued[1]).toBe(unsampledTrace)
      expect(continued[2]).toMatch(/^[0-9a-f]{16}$/)
      expect(continued[2]).not.toBe(callerSpanId)
      expect(continued[3]).toBe("00")

      // The sampled requests arrive (spans are exported in the order they end: the others first).
      const spans = await waitFor("the sampled trace", () => {
        const spans = spansOf(receiver)
        return spans.some((s) => s.name === "POST /service/{profile}/{environment}/json/{uuid}") ? spans : undefined
      })
      expect(spans.every((s) => s.traceId === sampledTrace)).toBe(true)
      expect(spans.map((s) => s.name).sort()).toEqual([
        "POST /oauth/token",
        "POST /service/{profile}/{environment}/json/{uuid}"
      ])
    } finally {
      await server.stop()
      await receiver.close()
    }
  }, 120_000)
})

describe("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", () => {
  it("sends protobuf, and what is still queued at SIGTERM is flushed before the exit", async () => {
    const receiver = await startReceiver()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.endpoint}/`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      // Nothing leaves before the shutdown: what arrives was flushed by it.
      OTEL_BSP_SCHEDULE_DELAY: "600000"
    })
    try {
      await tokenAndCall(server.base)
      await sleep(300)
      expect(receiver.exports).toHaveLength(0)
      expect(await server.stop()).toBe(0)
      expect(receiver.exports.length).toBeGreaterThan(0)
      for (const e of receiver.exports) {
        expect(e.path).toBe("/v1/traces")
        expect(e.headers["content-type"]).toBe("application/x-protobuf")
      }
      const payload = Buffer.concat(receiver.exports.map((e) => e.body)).toString("latin1")
      for (const name of ["service-auth", "POST /oauth/token", "service_auth.handler.configured"]) {
        expect(payload).toContain(name)
      }
    } finally {
      await server.stop()
      await receiver.close()
    }
  }, 120_000)
})

describe("OTEL_EXPORTER_OTLP_COMPRESSION=gzip with OTLP/JSON", () => {
  it("sends gzip-compressed JSON, with the configured headers, that holds the request's spans", async () => {
    const receiver = await startReceiver()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_COMPRESSION: "gzip",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-collector-key=gzip-secret",
      OTEL_BSP_SCHEDULE_DELAY: "100"
    })
    try {
      await tokenAndCall(server.base)
      const received = () => Buffer.concat(receiver.exports.map((e) => gunzipSync(e.body))).toString("utf8")
      const deadline = Date.now() + 10_000
      while (!received().includes("POST /service/") && Date.now() < deadline) await sleep(50)
      const names: Array<string> = []
      for (const e of receiver.exports) {
        expect(e.headers["content-type"]).toBe("application/json")
        expect(e.headers["content-encoding"]).toBe("gzip")
        expect(e.headers["x-collector-key"]).toBe("gzip-secret")
        const request = JSON.parse(gunzipSync(e.body).toString("utf8"))
        for (const resourceSpans of request.resourceSpans) {
          for (const scopeSpans of resourceSpans.scopeSpans) names.push(...scopeSpans.spans.map((span: { name: string }) => span.name))
        }
      }
      expect(names).toContain("POST /service/{profile}/{environment}/json/{uuid}")
    } finally {
      await server.stop()
      await receiver.close()
    }
  }, 120_000)
})

describe("an unreachable collector", () => {
  it("slows no request; the failure is logged once, and the server still stops at once", async () => {
    const deadPort = await freePort()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${deadPort}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      // The exporter retries a batch until this deadline: the failure is known within it.
      OTEL_EXPORTER_OTLP_TIMEOUT: "1000",
      // Variables this exporter cannot honour: named once at the start.
      OTEL_SPAN_EVENT_COUNT_LIMIT: "10",
      OTEL_BSP_MAX_QUEUE_SIZE: "100"
    })
    try {
      const started = Date.now()
      await tokenAndCall(server.base)
      await tokenAndCall(server.base)
      // A figure to read; the bound is only far below what waiting on the exporter's retries would cost.
      console.info(`4 requests with the collector unreachable: ${Date.now() - started} ms`)
      expect(Date.now() - started).toBeLessThan(10_000)
      const warningsOf = () => server.log().split("\n").filter((line) => line.includes("cannot export spans"))
      await waitFor("the warning", () => (warningsOf().length > 0 ? true : undefined))
      // More batches fail meanwhile; the warning is not repeated.
      await tokenAndCall(server.base)
      await sleep(2_500)
      const warnings = warningsOf()
      expect(warnings, server.log()).toHaveLength(1)
      expect(warnings[0]).toMatch(/level=WARN/)
      const ignored = server.log().split("\n").filter((line) => line.includes("not supported and ignored"))
      expect(ignored).toHaveLength(1)
      expect(ignored[0]).toContain("traces: OTEL_SPAN_EVENT_COUNT_LIMIT, OTEL_BSP_MAX_QUEUE_SIZE are not supported and ignored")
      const stopping = Date.now()
      expect(await server.stop()).toBe(0)
      // Without waiting out SHUTDOWN_GRACE_MS (10 s) for the exporter.
      console.info(`stopped in ${Date.now() - stopping} ms with the collector unreachable`)
      expect(Date.now() - stopping).toBeLessThan(10_000)
    } finally {
      await server.stop()
    }
  }, 120_000)
})

describe("no OTLP endpoint", () => {
  it("sends nothing, and leftover OTEL_ settings neither matter nor stop the start", async () => {
    const receiver = await startReceiver()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_SERVICE_NAME: "leftover",
      OTEL_BSP_SCHEDULE_DELAY: "100"
    })
    try {
      await tokenAndCall(server.base)
      await sleep(1_000)
      expect(await server.stop()).toBe(0)
      expect(receiver.exports).toHaveLength(0)
    } finally {
      await server.stop()
      await receiver.close()
    }
  }, 120_000)
})

describe("an endpoint, but traces turned off", () => {
  it.each([{ OTEL_SDK_DISABLED: "true" }, { OTEL_TRACES_EXPORTER: "none" }])("%j: nothing is sent", async (off) => {
    const receiver = await startReceiver()
    const server = await startServer({
      ...serverSettings(),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      ...off
    })
    try {
      await tokenAndCall(server.base)
      await sleep(1_000)
      expect(await server.stop()).toBe(0)
      expect(receiver.exports).toHaveLength(0)
    } finally {
      await server.stop()
      await receiver.close()
    }
  }, 120_000)
})

describe("start-up failures: one line, exit 1", () => {
  /** `node dist/service-auth.mjs` (built by the global setup) run to its exit. */
  const runToExit = async (env: Record<string, string>) => {
    const port = await freePort()
    return new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, ["dist/service-auth.mjs"], {
        cwd: ROOT,
        env: { ...process.env, ...serverSettings(), PORT: String(port), HOST: "127.0.0.1", ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
      // A hang's deadline: a busy machine can take many seconds to start node.
      const timer = setTimeout(() => child.kill("SIGKILL"), 45_000)
      child.once("close", (code) => {
        clearTimeout(timer)
        resolve({ code, output })
      })
    })
  }

  it.each([
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf (grpc is not supported)"
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "thrift" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/json or http/protobuf (grpc is not supported)"
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL"
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_COMPRESSION: "brotli" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_COMPRESSION must be gzip or none"
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: "/no/such/ca.pem" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE names a file that cannot be read"
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://[::1" },
      "service-auth could not start: invalid setting: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL"
    ]
  ])("%j", async (env, line) => {
    const result = await runToExit(env)
    expect(result.code, result.output).toBe(1)
    expect(result.output.split("\n").filter((l) => l.trim() !== "")).toEqual([line])
  })
})
