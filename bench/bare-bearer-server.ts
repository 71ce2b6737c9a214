/**
 * Reference for `npm run bench`: the least a protected JSON service can do on node:http with jose.
 * It parses `Authorization: Bearer`, verifies the token with `jwtVerify` against the JWKS of the
 * service-auth under test (RS256 only), checks that `data` names the called path, reads the JSON
 * body and echoes it as service-auth's echo handler does. No framework, no revocation check.
 *
 *   PORT BARE_JWKS_URL
 */
import * as Jose from "jose"
import { createServer, type ServerResponse } from "node:http"

const port = Number(process.env.PORT)
const jwksUrl = process.env.BARE_JWKS_URL
if (jwksUrl === undefined) throw new Error("BARE_JWKS_URL is required")
const jwks = Jose.createLocalJWKSet(await (await fetch(jwksUrl)).json())

const PATH = /^\/service\/([^/]+)\/([^/]+)\/json\/([^/]+)$/

const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
  response.end(JSON.stringify(body))
}

const server = createServer(async (request, response) => {
  const path = PATH.exec(request.url ?? "")
  const authorization = request.headers.authorization ?? ""
  if (request.method !== "POST" || path === null) return answer(response, 404, { error: "not_found" })
  if (!authorization.startsWith("Bearer ")) return answer(response, 401, { error: "invalid_token" })
  let claims: Jose.JWTPayload
  try {
    claims = (await Jose.jwtVerify(authorization.slice(7), jwks, { algorithms: ["RS256"] })).payload
  } catch {
    return answer(response, 401, { error: "invalid_token" })
  }
  const [, profile, environment, uuid] = path
  const data = claims.data as { profile?: string; environment?: string; service_uuid?: string } | undefined
  if (data?.profile !== profile || data?.environment !== environment || data?.service_uuid !== uuid) {
    return answer(response, 401, { error: "invalid_token" })
  }
  let text = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (text += chunk))
  request.on("end", () => {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return answer(response, 400, { error: "invalid_request" })
    }
    answer(response, 200, { service_uuid: uuid, profile, environment, client_id: claims.client_id, body })
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
