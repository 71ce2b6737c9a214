/**
 * Reference for `npm run bench`'s proxy scenario: the least an authenticating JSON proxy can do on
 * node:http with jose. A Bearer token is verified against the public keys in BARE_JWKS (RS256
 * only), each distinct token once, and remembered until its `exp`, as service-auth remembers its
 * tokens. The body must be a JSON object; it is POSTed to BARE_UPSTREAM_URL over keep-alive
 * connections, and the upstream's 200 JSON text is answered as it came. No framework, no check of
 * which service a token names, no revocation check, no identity headers, no metrics: a ratio under 1
 * is the price of those, plus any waste.
 *
 * It is as lean as it can be, because a weaker reference flatters the ratio:
 * - a remembered token is checked without a promise or a microtask (an `await` on every call cost
 *   about a fifth of this server's rate);
 * - its token is its own, signed by `bench/proxy.ts` with the least a token needs (`scope`, `iat`,
 *   `exp`: 458 characters, against service-auth's 1,008, which cost a few per cent to look up);
 * - `npm run bench` runs it compiled, not under tsx's loader (`startBare`).
 *
 *   PORT BARE_JWKS BARE_UPSTREAM_URL   npx tsx bench/bare-proxy-server.ts
 */
import * as Jose from "jose"
import { Agent, createServer, type IncomingMessage, request as httpRequest, type ServerResponse } from "node:http"
import { answer } from "./bare-bearer-check.js"

const port = Number(process.env.PORT)
const upstreamUrl = process.env.BARE_UPSTREAM_URL
if (!upstreamUrl) throw new Error("BARE_UPSTREAM_URL is required")
// Parsed once: a URL string given to http.request is parsed again on every call.
const parsed = new URL(upstreamUrl)
const upstreamHost = parsed.hostname
const upstreamPort = Number(parsed.port || 80)
const upstreamPath = `${parsed.pathname}${parsed.search}`
if (!process.env.BARE_JWKS) throw new Error("BARE_JWKS is required")
const jwks = Jose.createLocalJWKSet(JSON.parse(process.env.BARE_JWKS))
const agent = new Agent({ keepAlive: true, maxSockets: 256 })
const badGateway = { error: "bad_gateway", error_description: "The upstream service failed" }
const invalidToken = { error: "invalid_token", error_description: "The access token is invalid" }
const PATH = /^\/service\/([^/?]+)\/([^/?]+)\/json\/([^/?]+)$/

/** Verified claims by token: bounded, cleared when full (a benchmark holds few tokens). */
const remembered = new Map<string, Jose.JWTPayload>()
const REMEMBERED_MAX = 100_000

const proxy = (request: IncomingMessage, response: ServerResponse) => {
  const parts: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => parts.push(chunk))
  request.on("end", () => {
    const text = Buffer.concat(parts)
    let body: unknown
    try {
      body = JSON.parse(text.toString("utf8"))
    } catch {
      return answer(response, 400, { error: "invalid_request", error_description: "The body is not JSON" })
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return answer(response, 400, { error: "invalid_request", error_description: "The body is not a JSON object" })
    }
    const outgoing = httpRequest({
      host: upstreamHost,
      port: upstreamPort,
      path: upstreamPath,
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": text.length }
    }, (incoming) => {
      const chunks: Array<Buffer> = []
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
      incoming.on("end", () => {
        if (incoming.statusCode !== 200) return answer(response, 502, badGateway)
        // The upstream's JSON text as it came, as a bare proxy answers it.
        const reply = Buffer.concat(chunks)
        response.writeHead(200, { "content-type": "application/json", "content-length": reply.length })
        response.end(reply)
      })
    })
    outgoing.on("error", () => answer(response, 502, badGateway))
    outgoing.end(text)
  })
}

const server = createServer((request, response) => {
  if (request.method !== "POST" || !PATH.test(request.url ?? "")) {
    return answer(response, 404, { error: "not_found", error_description: "Not found" })
  }
  const authorization = request.headers.authorization ?? ""
  if (!authorization.startsWith("Bearer ")) return answer(response, 401, invalidToken)
  const token = authorization.slice(7)
  const claims = remembered.get(token)
  if (claims !== undefined) {
    if ((claims.exp ?? 0) * 1000 <= Date.now()) {
      remembered.delete(token)
      return answer(response, 401, invalidToken)
    }
    return proxy(request, response)
  }
  Jose.jwtVerify(token, jwks, { algorithms: ["RS256"] }).then(({ payload }) => {
    if (remembered.size >= REMEMBERED_MAX) remembered.clear()
    remembered.set(token, payload)
    proxy(request, response)
  }, () => answer(response, 401, invalidToken))
})
server.keepAliveTimeout = 65_000
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
