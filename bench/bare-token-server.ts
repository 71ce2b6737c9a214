/**
 * Reference for `npm run bench`: the least a token endpoint can do on node:http with jose. It
 * parses the form, checks the six fields and the grant type, compares a SHA-256 digest of the secret
 * in constant time, and signs the same claims and header service-auth issues. No framework, no
 * storage, no brute-force counting: the bar service-auth's token endpoint is measured against.
 *
 *   PORT BARE_CLIENT_ID BARE_CLIENT_SECRET BARE_PROFILE BARE_ENVIRONMENT BARE_SERVICE_UUID BARE_ISSUER
 */
import * as Jose from "jose"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"
import { createServer, type ServerResponse } from "node:http"

const env = (name: string) => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}
const digest = (secret: string) => createHash("sha256").update(secret).digest()

const client = { id: env("BARE_CLIENT_ID"), digest: digest(env("BARE_CLIENT_SECRET")) }
const target = { profile: env("BARE_PROFILE"), environment: env("BARE_ENVIRONMENT"), uuid: env("BARE_SERVICE_UUID") }
const issuer = env("BARE_ISSUER")
const { privateKey, publicKey } = await Jose.generateKeyPair("RS256")
const kid = await Jose.calculateJwkThumbprint(await Jose.exportJWK(publicKey))

const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache" })
  response.end(JSON.stringify(body))
}
const FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const

const server = createServer((request, response) => {
  let body = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (body += chunk))
  request.on("end", async () => {
    if (request.method !== "POST" || request.url !== "/oauth/token") return answer(response, 404, { error: "not_found" })
    const form = new URLSearchParams(body)
    if (FIELDS.some((name) => !form.get(name))) {
      return answer(response, 400, { error: "invalid_request", error_description: "Missing required parameters" })
    }
    if (form.get("grant_type") !== "client_credentials") return answer(response, 400, { error: "unsupported_grant_type" })
    const presented = digest(form.get("client_secret")!)
    if (
      form.get("profile") !== target.profile || form.get("environment") !== target.environment ||
      form.get("service_uuid") !== target.uuid
    ) return answer(response, 400, { error: "invalid_request", error_description: "Missing required parameters" })
    if (!timingSafeEqual(presented, client.digest) || form.get("client_id") !== client.id) {
      return answer(response, 401, { error: "invalid_client", error_description: "Invalid client credentials" })
    }
    const iat = Math.floor(Date.now() / 1000)
    const accessToken = await new Jose.SignJWT({
      data: { service_uuid: target.uuid, profile: target.profile, environment: target.environment },
      scope: "service:call",
      iat,
      exp: iat + 3600,
      iss: issuer,
      aud: `${issuer}/service/${target.profile}/${target.environment}/json/${target.uuid}`,
      sub: client.id,
      client_id: client.id,
      jti: randomUUID()
    }).setProtectedHeader({ alg: "RS256", typ: "JWT", kid }).sign(privateKey)
    answer(response, 200, { access_token: accessToken, token_type: "Bearer", expires_in: 3600, scope: "service:call" })
  })
})
server.listen(Number(env("PORT")), "127.0.0.1", () => console.log(`listening ${env("PORT")}`))
