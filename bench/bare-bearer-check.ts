/**
 * What the bare references of `npm run bench` check before they touch a service call's body: the
 * path, and a Bearer token verified with jose (`jwtVerify`, RS256 only) against the JWKS of the
 * service-auth under test (fetched once at start), whose `data` and `aud` name the called path.
 * No revocation check, no cache of verified tokens: every request pays for a full RSA verification.
 * (The proxy reference remembers its tokens itself: `bare-proxy-server.ts`.)
 */
import * as Jose from "jose"
import type { IncomingMessage, ServerResponse } from "node:http"

export const answer = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
  response.end(JSON.stringify(body))
}

/** Reads the whole body and hands it on parsed, with its text; a body that is not JSON is answered 400. */
export const readJson = (
  request: IncomingMessage,
  response: ServerResponse,
  then: (body: unknown, text: string) => void
) => {
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
    then(body, text)
  })
}

export const loadJwks = async () => {
  const jwksUrl = process.env.BARE_JWKS_URL
  if (!jwksUrl) throw new Error("BARE_JWKS_URL is required")
  const jwksResponse = await fetch(jwksUrl, { signal: AbortSignal.timeout(5_000) })
  if (!jwksResponse.ok) throw new Error(`GET ${jwksUrl}: ${jwksResponse.status}`)
  return Jose.createLocalJWKSet(await jwksResponse.json())
}

const PATH = /^\/service\/([^/?]+)\/([^/?]+)\/json\/([^/?]+)$/
const invalidToken = { error: "invalid_token", error_description: "The access token is invalid" }

export interface CheckedCall {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
  readonly claims: Jose.JWTPayload
}

/** The call when it may go on; otherwise undefined, and the refusal has been answered. */
export const checkCall = async (
  request: IncomingMessage,
  response: ServerResponse,
  jwks: ReturnType<typeof Jose.createLocalJWKSet>
): Promise<CheckedCall | undefined> => {
  const path = PATH.exec(request.url ?? "")
  if (request.method !== "POST" || path === null) {
    return void answer(response, 404, { error: "not_found", error_description: "Not found" })
  }
  const authorization = request.headers.authorization ?? ""
  if (!authorization.startsWith("Bearer ")) return void answer(response, 401, invalidToken)
  const token = authorization.slice(7)
  let claims: Jose.JWTPayload
  try {
    claims = (await Jose.jwtVerify(token, jwks, { algorithms: ["RS256"] })).payload
  } catch {
    return void answer(response, 401, invalidToken)
  }
  const [url, profile, environment, uuid] = path as unknown as [string, string, string, string]
  const data = claims.data as { profile?: unknown; environment?: unknown; service_uuid?: unknown } | undefined
  if (
    data?.profile !== profile || data?.environment !== environment || data?.service_uuid !== uuid ||
    typeof claims.aud !== "string" || !claims.aud.endsWith(url)
  ) return void answer(response, 401, invalidToken)
  return { profile, environment, uuid, claims }
}
