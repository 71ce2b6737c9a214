/**
 * Reference for `npm run bench`: the least a token endpoint can do on node:http with jose. It
 * parses the form, checks the grant type and the six fields, looks the client up in memory,
 * compares SHA-256 digests of the secret in constant time, and signs the same claims and header
 * service-auth issues. No framework, no storage, no brute-force counting, no `last_used_at`: the
 * bar service-auth's token endpoint is measured against.
 *
 *   PORT BARE_CLIENT_ID BARE_CLIENT_SECRET BARE_PROFILE BARE_ENVIRONMENT BARE_SERVICE_UUID
 *   [BARE_ISSUER, default http://localhost:$PORT as service-auth without ISSUER]
 *
 *   npx tsx bench/bare-token-server.ts
 */
import * as Jose from "jose"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"
import { createServer, type ServerResponse } from "node:http"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`${name} is required`)
  return value
}
const digest = (secret: string) => createHash("sha256").update(secret).digest()

interface Client {
  readonly digest: Buffer
  readonly profile: string
  readonly environment: string
  readonly uuid: string
}

const port = Number(env("PORT"))
const issuer = process.env.BARE_ISSUER || `http://localhost:${port}`
// A Map, as a store would be: the lookup is part of what a token endpoint has to do.
const clients = new Map<string, Client>([[env("BARE_CLIENT_ID"), {
  digest: digest(env("BARE_CLIENT_SECRET")),
  profile: env("BARE_PROFILE"),
  environment: env("BARE_ENVIRONMENT"),
  uuid: env("BARE_SERVICE_UUID").toLowerCase()
}]])
const { privateKey, publicKey } = await Jose.generateKeyPair("RS256", { modulusLength: 2048 })
const kid = await Jose.calculateJwkThumbprint(await Jose.exportJWK(publicKey))

const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache" })
  response.end(JSON.stringify(body))
}
const invalidRequest = { error: "invalid_request", error_description: "Missing required parameters" }
const invalidClient = { error: "invalid_client", error_description: "Invalid client credentials" }
const FIELDS = ["client_id", "client_secret", "profile", "environment", "service_uuid"] as const

const issue = async (response: ServerResponse, form: URLSearchParams) => {
  const grantType = form.get("grant_type")
  if (!grantType) return answer(response, 400, invalidRequest)
  if (grantType !== "client_credentials") {
    return answer(response, 400, { error: "unsupported_grant_type", error_description: "Unsupported grant type" })
  }
  if (FIELDS.some((name) => !form.get(name))) return answer(response, 400, invalidRequest)
  const clientId = form.get("client_id")!
  const client = clients.get(clientId)
  const profile = form.get("profile")!
  const environment = form.get("environment")!
  const uuid = form.get("service_uuid")!.toLowerCase()
  // An unknown target is 400 before the client is judged, as in service-auth.
  if (client !== undefined && (profile !== client.profile || environment !== client.environment || uuid !== client.uuid)) {
    return answer(response, 400, invalidRequest)
  }
  if (client === undefined || !timingSafeEqual(digest(form.get("client_secret")!), client.digest)) {
    return answer(response, 401, invalidClient)
  }
  const iat = Math.floor(Date.now() / 1000)
  const accessToken = await new Jose.SignJWT({
    data: { service_uuid: uuid, profile, environment },
    scope: "service:call",
    iat,
    exp: iat + 3600,
    iss: issuer,
    aud: `${issuer}/service/${profile}/${environment}/json/${uuid}`,
    sub: clientId,
    client_id: clientId,
    jti: randomUUID()
  }).setProtectedHeader({ alg: "RS256", typ: "JWT", kid }).sign(privateKey)
  answer(response, 200, { access_token: accessToken, token_type: "Bearer", expires_in: 3600, scope: "service:call" })
}

const server = createServer((request, response) => {
  let body = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (body += chunk))
  request.on("end", () => {
    if (request.method !== "POST" || request.url !== "/oauth/token") {
      return answer(response, 404, { error: "not_found", error_description: "Not found" })
    }
    if (!(request.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) {
      return answer(response, 400, invalidRequest)
    }
    issue(response, new URLSearchParams(body)).catch(() =>
      answer(response, 500, { error: "server_error", error_description: "Internal server error" })
    )
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
