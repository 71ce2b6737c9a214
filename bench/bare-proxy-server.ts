/**
 * Reference for `npm run bench`'s proxy scenario: the least an authenticating JSON proxy can do on
 * node:http with jose. It verifies the Bearer token as `bare-bearer-server.ts` does (RS256 against
 * the JWKS of the service-auth under test; `data` and `aud` name the called path), checks that the
 * body is a JSON object, POSTs it to BARE_UPSTREAM_URL over keep-alive connections, and answers the
 * upstream's JSON object. No framework, no revocation check, no cache of verified tokens.
 *
 *   PORT BARE_JWKS_URL BARE_UPSTREAM_URL   npx tsx bench/bare-proxy-server.ts
 */
import * as Jose from "jose"
import { Agent, createServer, request as httpRequest, type ServerResponse } from "node:http"

const port = Number(process.env.PORT)
const jwksUrl = process.env.BARE_JWKS_URL
const upstream = process.env.BARE_UPSTREAM_URL
if (!jwksUrl || !upstream) throw new Error("BARE_JWKS_URL and BARE_UPSTREAM_URL are required")
const jwksResponse = await fetch(jwksUrl, { signal: AbortSignal.timeout(5_000) })
if (!jwksResponse.ok) throw new Error(`GET ${jwksUrl}: ${jwksResponse.status}`)
const jwks = Jose.createLocalJWKSet(await jwksResponse.json())
const agent = new Agent({ keepAlive: true, maxSockets: 128 })

const PATH = /^\/service\/([^/?]+)\/([^/?]+)\/json\/([^/?]+)$/

const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
  response.end(JSON.stringify(body))
}
const invalidToken = { error: "invalid_token", error_description: "The access token is invalid" }
const badGateway = { error: "bad_gateway", error_description: "The upstream service failed" }

const server = createServer(async (request, response) => {
  const path = PATH.exec(request.url ?? "")
  if (request.method !== "POST" || path === null) {
    return answer(response, 404, { error: "not_found", error_description: "Not found" })
  }
  const authorization = request.headers.authorization ?? ""
  if (!authorization.startsWith("Bearer ")) return answer(response, 401, invalidToken)
  let claims: Jose.JWTPayload
  try {
    claims = (await Jose.jwtVerify(authorization.slice(7), jwks, { algorithms: ["RS256"] })).payload
  } catch {
    return answer(response, 401, invalidToken)
  }
  const [url, profile, environment, uuid] = path
  const data = claims.data as { profile?: unknown; environment?: unknown; service_uuid?: unknown } | undefined
  if (
    data?.profile !== profile || data?.environment !== environment || data?.service_uuid !== uuid ||
    typeof claims.aud !== "string" || !claims.aud.endsWith(url)
  ) return answer(response, 401, invalidToken)
  let text = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (text += chunk))
  request.on("end", () => {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return answer(response, 400, { error: "invalid_request", error_description: "The body is not JSON" })
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return answer(response, 400, { error: "invalid_request", error_description: "The body is not a JSON object" })
    }
    const outgoing = httpRequest(upstream, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", accept: "application/json", "content-length": Buffer.byteLength(text) }
    }, (incoming) => {
      let reply = ""
      incoming.setEncoding("utf8")
      incoming.on("data", (chunk: string) => (reply += chunk))
      incoming.on("end", () => {
        try {
          const json: unknown = JSON.parse(reply)
          if (incoming.statusCode !== 200 || typeof json !== "object" || json === null) throw new Error("not an object")
          answer(response, 200, json)
        } catch {
          answer(response, 502, badGateway)
        }
      })
    })
    outgoing.setTimeout(10_000, () => outgoing.destroy())
    outgoing.on("error", () => answer(response, 502, badGateway))
    outgoing.end(text)
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
