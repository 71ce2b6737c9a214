/**
 * Reference for `npm run bench`'s proxy scenario: the least an authenticating JSON proxy can do on
 * node:http with jose. It checks the call as `bare-bearer-check.ts` says (a Bearer token verified
 * against the JWKS of the service-auth under test, each distinct token once and then remembered
 * until its `exp`, as service-auth does), checks that the body is a JSON object, POSTs it to
 * BARE_UPSTREAM_URL over keep-alive connections, and answers the upstream's 200 JSON text as it
 * came. No framework, no revocation check, no identity headers, no metrics.
 *
 *   PORT BARE_JWKS_URL BARE_UPSTREAM_URL   npx tsx bench/bare-proxy-server.ts
 */
import { Agent, createServer, request as httpRequest } from "node:http"
import { answer, checkCall, loadJwks } from "./bare-bearer-check.js"

const port = Number(process.env.PORT)
const upstreamUrl = process.env.BARE_UPSTREAM_URL
if (!upstreamUrl) throw new Error("BARE_UPSTREAM_URL is required")
// Parsed once: a URL string given to http.request is parsed again on every call.
const parsed = new URL(upstreamUrl)
const upstream = { host: parsed.hostname, port: Number(parsed.port || 80), path: `${parsed.pathname}${parsed.search}` }
const jwks = await loadJwks()
const agent = new Agent({ keepAlive: true, maxSockets: 128 })
const badGateway = { error: "bad_gateway", error_description: "The upstream service failed" }

const server = createServer(async (request, response) => {
  if ((await checkCall(request, response, jwks, { remember: true })) === undefined) return
  // The body as Buffers, parsed once: as the yardstick's bare proxy reads it.
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
      ...upstream,
      method: "POST",
      agent,
      headers: { "content-type": "application/json", accept: "application/json", "content-length": text.length }
    }, (incoming) => {
      const chunks: Array<Buffer> = []
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
      incoming.on("end", () => {
        if (incoming.statusCode !== 200) return answer(response, 502, badGateway)
        // The upstream's JSON text as it came, as a bare proxy answers it.
        const reply = Buffer.concat(chunks)
        response.writeHead(200, { "content-type": "application/json", "cache-control": "no-store", "content-length": reply.length })
        response.end(reply)
      })
    })
    outgoing.on("error", () => answer(response, 502, badGateway))
    outgoing.end(text)
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
