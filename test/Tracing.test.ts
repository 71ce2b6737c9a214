/**
 * Traces over OTLP/HTTP: the real server (`npm start`, embedded database) exporting to a receiver
 * in this test, which collects what is POSTed to /v1/traces. With OTEL_EXPORTER_OTLP_ENDPOINT set,
 * a token request arrives as one span and a proxied call as two, with `service.name`
 * `service-auth`, the grant's, the cache's and storage's work as attributes and events, continuing
 * the caller's `traceparent`, and no secret; head sampling keeps only what it decides to.
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { ADMIN_TOKEN, type Receiver, removeTestDirs, serverSettings, spansOf, startReceiver, tokenAndCall } from "./support/TracedServer.js"
import { waitFor } from "./support/OtlpSink.js"

afterAll(removeTestDirs)

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

    expect(receiver.received[0]!.path).toBe("/v1/traces")
    expect(receiver.received[0]!.headers["content-type"]).toBe("application/json")
    expect(receiver.received[0]!.headers["x-collector-key"]).toBe("collector-secret")
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
    const upstream = receiver.received.find((e) => e.path.startsWith("/upstream"))!
    const proxySpan = await waitFor(
      "the proxy's span",
      () => spansOf(receiver).find((s) => s.name === "ServiceHandlers.proxy" && s.attributes["http.response.status_code"] === 200)
    )
    expect(upstream.headers["traceparent"]).toBe(`00-${proxySpan.traceId}-${proxySpan.spanId}-01`)
    expect(proxySpan.kind).toBe(3)
    expect(proxySpan.attributes).toEqual({
      "http.request.method": "POST",
      "server.address": "127.0.0.1",
      "server.port": Number(new URL(receiver.endpoint).port),
      "http.response.status_code": 200
    })
    const proxiedCall = await waitFor(
      "the spans of the proxied call",
      () => spansOf(receiver).find((s) => s.name === SERVICE_SPAN && s.attributes["service_auth.service_uuid"] === proxied.service.uuid)
    )
    expect(proxySpan.parentSpanId).toBe(proxiedCall.spanId)
    expect(proxiedCall.attributes["service_auth.handler.configured"]).toBe("proxy")
    expect(spansOf(receiver).filter((s) => s.traceId === proxiedCall.traceId)).toHaveLength(2)

    // Nothing secret anywhere in what was exported: not the client secret (sent in the form and the
    // query string), the tokens, the admin token, nor the exporter's own header.
    const payload = receiver.received.filter((e) => e.path === "/v1/traces").map((e) => e.body.toString("utf8")).join("\n")
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
      const upstreamCalls = () => receiver.received.filter((e) => e.path === "/upstream").map((e) => String(e.headers["traceparent"]))
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
