/**
 * The local upstream of the proxy handler tests (node:http on 127.0.0.1, port 0): it answers well,
 * slowly, wrongly or not at all depending on the path, and records every request it receives.
 */
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { expectServiceError } from "./Tokens.js"

export interface Received {
  readonly path: string
  readonly method: string
  readonly contentType: string | undefined
  readonly body: string
}

export const UPSTREAM_ANSWER = { ok: true, total: 42, items: [{ id: 1 }, { id: 2, tags: ["a", "b"] }], nothing: null }

/** A local upstream whose answer depends on the path; it records every request it receives. */
export const upstream = {
  server: undefined as NodeHttp.Server | undefined,
  received: [] as Array<Received>,
  url: (path: string) => `http://127.0.0.1:${(upstream.server!.address() as AddressInfo).port}${path}`,
  receivedAt: (path: string) => upstream.received.filter((request) => request.path === path)
}

/** The port of a listener that was opened and closed again: nothing answers there. */
export let closedPort = 0

export const startUpstream = async () => {
  upstream.server = NodeHttp.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const path = (request.url ?? "").split("?")[0]!
      upstream.received.push({
        path,
        method: request.method ?? "",
        contentType: request.headers["content-type"],
        body: Buffer.concat(chunks).toString("utf8")
      })
      const json = (status: number, text: string) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(text)
      }
      if (path.startsWith("/ok")) return json(200, JSON.stringify(UPSTREAM_ANSWER))
      if (path.startsWith("/empty-object")) return json(200, "{}")
      if (path.startsWith("/hang")) return // never answers
      if (path.startsWith("/text")) {
        response.writeHead(200, { "content-type": "text/plain" })
        return response.end("this is not JSON")
      }
      if (path.startsWith("/json-label-text")) return json(200, "this is not JSON either")
      if (path.startsWith("/array")) return json(200, "[1,2,3]")
      if (path.startsWith("/string")) return json(200, `"text"`)
      if (path.startsWith("/null")) return json(200, "null")
      if (path.startsWith("/empty")) return json(200, "")
      if (path.startsWith("/error-object")) return json(500, JSON.stringify({ error: "boom" }))
      if (path.startsWith("/not-found")) return json(404, JSON.stringify({ error: "missing" }))
      if (path.startsWith("/unavailable")) return json(503, JSON.stringify({ error: "later" }))
      if (path.startsWith("/redirect")) {
        response.writeHead(302, { location: upstream.url("/ok") })
        return response.end()
      }
      if (path.startsWith("/reset")) return request.socket.destroy()
      return json(404, "{}")
    })
  })
  await new Promise<void>((resolve) => upstream.server!.listen(0, "127.0.0.1", resolve))

  const probe = NodeHttp.createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
  closedPort = (probe.address() as AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
}

export const stopUpstream = async () => {
  upstream.server?.closeAllConnections()
  await new Promise<void>((resolve) => (upstream.server ? upstream.server.close(() => resolve()) : resolve()))
}

export const expectBadGateway = (response: Parameters<typeof expectServiceError>[0]) => expectServiceError(response, 502, "bad_gateway")
