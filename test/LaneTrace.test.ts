/**
 * The fast lane's server span carries what the app's `requestSpan` does (both build their
 * attributes with `serverSpanAttributes`): `url.scheme` `https` for a request that came over TLS,
 * and `client.address` as resolved through TRUSTED_PROXIES, not the TCP peer (the proxy).
 */
import { describe, expect, it } from "@effect/vitest"
import { Tracer } from "effect"
import type { IncomingMessage } from "node:http"
import { rememberClientAddress } from "../src/http/ClientAddress.js"
import { serverSpan } from "../src/http/LaneTrace.js"

/** A tracer that keeps each span's attributes. */
const recordingTracer = () => {
  const spans: Array<{ readonly name: string; readonly attributes: Map<string, unknown> }> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      spans.push({ name, attributes })
      return {
        _tag: "Span",
        name,
        spanId: "0000000000000001",
        traceId: "00000000000000000000000000000001",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        attribute: (key: string, value: unknown) => void attributes.set(key, value),
        event: () => {},
        addLinks: () => {},
        end: () => {}
      } as unknown as Tracer.Span
    },
    context: (f) => f()
  })
  return { spans, lane: { tracer, sampler: { name: "always_on" as const, ratio: 1 } } }
}

const request = (socket: { readonly remoteAddress?: string; readonly encrypted?: boolean }) =>
  ({ headers: {}, socket } as unknown as IncomingMessage)

describe("the fast lane's server span", () => {
  it("over TLS: url.scheme https", () => {
    const { lane, spans } = recordingTracer()
    serverSpan(lane, request({ remoteAddress: "127.0.0.1", encrypted: true }), "/oauth/token", "/oauth/token", 0n)
    expect(Object.fromEntries(spans[0]!.attributes)).toEqual({
      "http.request.method": "POST",
      "http.route": "/oauth/token",
      "url.path": "/oauth/token",
      "url.scheme": "https",
      "client.address": "127.0.0.1"
    })
  })

  it("behind a trusted proxy: client.address is the address resolved, not the proxy's", () => {
    const { lane, spans } = recordingTracer()
    const proxied = request({ remoteAddress: "10.0.0.2" })
    rememberClientAddress(proxied, "198.51.100.23")
    serverSpan(lane, proxied, "/oauth/token", "/oauth/token", 0n)
    expect(spans[0]!.attributes.get("client.address")).toBe("198.51.100.23")
    expect(spans[0]!.attributes.get("url.scheme")).toBe("http")
  })

  it("a socket already gone: no client.address, as on the app's entry", () => {
    const { lane, spans } = recordingTracer()
    serverSpan(lane, request({}), "/oauth/token", "/oauth/token", 0n)
    expect(spans[0]!.attributes.has("client.address")).toBe(false)
  })
})
