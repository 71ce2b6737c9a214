/**
 * Reference for `npm run bench`: the least a protected JSON service can do on node:http with jose.
 * It parses `Authorization: Bearer`, verifies the token with `jwtVerify` against the JWKS of the
 * service-auth under test (RS256 only; fetched once at start, so the same token works on both),
 * checks that `data` and `aud` name the called path, reads the JSON body and echoes it as
 * service-auth's echo handler does. No framework, no revocation check, no cache of verified tokens:
 * every request pays for a full RSA verification.
 *
 *   PORT BARE_JWKS_URL   npx tsx bench/bare-bearer-server.ts
 */
import * as Jose from "jose"
import { createServer, type ServerResponse } from "node:http"

const port = Number(process.env.PORT)
const jwksUrl = process.env.BARE_JWKS_URL
if (!jwksUrl) throw new Error("BARE_JWKS_URL is required")
const jwksResponse = await fetch(jwksUrl, { signal: AbortSignal.timeout(5_000) })
if (!jwksResponse.ok) throw new Error(`GET ${jwksUrl}: ${jwksResponse.status}`)
const jwks = Jose.createLocalJWKSet(await jwksResponse.json())

const PATH = /^\/service\/([^/?]+)\/([^/?]+)\/json\/([^/?]+)$/

const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
  response.end(JSON.stringify(body))
}
const invalidToken = { error: "invalid_token", error_description: "The access token is invalid" }

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
    answer(response, 200, { service_uuid: uuid, profile, environment, client_id: claims.client_id, body })
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
