/**
 * The trace exporter as the OpenTelemetry variables configure it, on the real server (`npm start`):
 * OTLP/protobuf, gzip with the configured headers, the flush at SIGTERM, a dead collector (one
 * warning, no slower requests, a prompt stop), the variables it cannot honour (one line), no
 * endpoint or traces turned off (nothing sent), and invalid settings (one line, exit 1).
 */
import { spawn } from "node:child_process"
import { gunzipSync } from "node:zlib"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, startServer } from "./support/ServerProcess.js"
import { removeTestDirs, ROOT, serverSettings, sleep, startReceiver, tokenAndCall } from "./support/TracedServer.js"
import { waitFor } from "./support/OtlpSink.js"

afterAll(removeTestDirs)

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
      expect(receiver.received).toHaveLength(0)
      expect(await server.stop()).toBe(0)
      expect(receiver.received.length).toBeGreaterThan(0)
      for (const e of receiver.received) {
        expect(e.path).toBe("/v1/traces")
        expect(e.headers["content-type"]).toBe("application/x-protobuf")
      }
      const payload = Buffer.concat(receiver.received.map((e) => e.body)).toString("latin1")
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
      const received = () => Buffer.concat(receiver.received.map((e) => gunzipSync(e.body))).toString("utf8")
      const deadline = Date.now() + 10_000
      while (!received().includes("POST /service/") && Date.now() < deadline) await sleep(50)
      const names: Array<string> = []
      for (const e of receiver.received) {
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

/** A server started with `env` (given the receiver's endpoint) takes a token and a call, stops cleanly, and sends the receiver nothing. */
const expectNothingSent = async (env: (endpoint: string) => Record<string, string>) => {
  const receiver = await startReceiver()
  const server = await startServer({ ...serverSettings(), OTEL_BSP_SCHEDULE_DELAY: "100", ...env(receiver.endpoint) })
  try {
    await tokenAndCall(server.base)
    await sleep(1_000)
    expect(await server.stop()).toBe(0)
    expect(receiver.received).toHaveLength(0)
  } finally {
    await server.stop()
    await receiver.close()
  }
}

describe("no OTLP endpoint", () => {
  it(
    "sends nothing, and leftover OTEL_ settings neither matter nor stop the start",
    () => expectNothingSent(() => ({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_SERVICE_NAME: "leftover" })),
    120_000
  )
})

describe("an endpoint, but traces turned off", () => {
  it.each([{ OTEL_SDK_DISABLED: "true" }, { OTEL_TRACES_EXPORTER: "none" }])(
    "%j: nothing is sent",
    (off) => expectNothingSent((endpoint) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...off })),
    120_000
  )
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
