/**
 * Raw HTTP helpers for the full-stack tests: requests the typed helpers of `TestServer.ts` cannot
 * express (no Content-Type, arbitrary bodies and Authorization headers, unnormalised paths), HTTP
 * Basic client authentication, and independent decoding and verification of issued JWTs.
 */
import { HttpBody, HttpClientRequest } from "@effect/platform"
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { createPublicKey, type JsonWebKey, verify } from "node:crypto"
import * as NodeHttp from "node:http"
import { ADMIN_TOKEN, type JsonResponse, send, serverPort } from "./TestServer.js"


/** Reads a raw node response to the end as a `JsonResponse` (body parsed when it is JSON). */
export const collectResponse = (
  incoming: NodeHttp.IncomingMessage,
  resume: (effect: Effect.Effect<JsonResponse, Error>) => void
): void => {
  const chunks: Array<Buffer> = []
  incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
  incoming.on("error", (error) => resume(Effect.fail(error)))
  incoming.on("end", () => {
    const text = Buffer.concat(chunks).toString("utf8")
    let body: unknown = undefined
    try {
      body = text === "" ? undefined : JSON.parse(text)
    } catch {
      body = undefined
    }
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
    }
    resume(Effect.succeed({ status: incoming.statusCode ?? 0, headers, body, text }))
  })
}
export const NO_STORE_HEADERS = { "cache-control": "no-store", pragma: "no-cache" } as const

/** Any request to the test server: `body` is sent as is, with no Content-Type unless one is given. */
export const request = (
  method: "GET" | "PUT" | "POST" | "DELETE",
  path: string,
  options: {
    readonly body?: string
    readonly contentType?: string
    readonly headers?: Record<string, string>
  } = {}
) =>
  send(
    HttpClientRequest.make(method)(path).pipe(
      HttpClientRequest.setHeaders(options.headers ?? {}),
      options.body === undefined
        ? (r) => r
        : HttpClientRequest.setBody(HttpBody.raw(options.body, { contentType: options.contentType }))
    )
  )

/** A POST to the token endpoint with a raw body and exactly the given Content-Type (or none). */
export const rawTokenRequest = (
  body: string,
  options: { readonly contentType?: string; readonly headers?: Record<string, string> } = {}
) => request("POST", "/oauth/token", { body, ...options })

/** An admin request with a raw body (sent as application/json unless told otherwise) and the admin token. */
export const rawAdminRequest = (
  method: "PUT" | "POST",
  path: string,
  body: string,
  contentType = "application/json"
) => request(method, path, { body, contentType, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })

/**
 * application/x-www-form-urlencoded encoding of one value (RFC 6749 appendix B), of any string:
 * lone surrogates become U+FFFD, as `Buffer` encodes them, where `encodeURIComponent` would throw.
 */
export const formEncode = (value: string): string =>
  [...Buffer.from(value, "utf8")]
    .map((b) => {
      const c = String.fromCharCode(b)
      return /[A-Za-z0-9*._-]/.test(c) ? c : c === " " ? "+" : `%${b.toString(16).toUpperCase().padStart(2, "0")}`
    })
    .join("")

/** `Basic base64(urlencode(client_id) ":" urlencode(client_secret))` (RFC 6749 §2.3.1). */
export const basicAuthorization = (clientId: string, clientSecret: string, scheme = "Basic"): string =>
  `${scheme} ${Buffer.from(`${formEncode(clientId)}:${formEncode(clientSecret)}`, "utf8").toString("base64")}`

/** Percent-encodes every byte of the value: a valid, if unusual, form encoding. */
export const percentEncodeAll = (value: string): string =>
  [...Buffer.from(value, "utf8")].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join("")

/**
 * A request whose path goes to the server byte for byte. URL parsing (and so the HTTP client)
 * resolves `..` and `%2E%2E` segments before sending; node:http does not.
 */
export const unnormalizedRequest = (method: string, path: string, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const port = yield* serverPort
    return yield* Effect.async<JsonResponse, Error>((resume) => {
      const outgoing = NodeHttp.request(
        { host: "127.0.0.1", port, method, path, headers, agent: false },
        (incoming) => collectResponse(incoming, resume)
      )
      outgoing.on("error", (error) => resume(Effect.fail(error)))
      outgoing.end()
    }).pipe(Effect.orDie)
  })

export interface DecodedJwt {
  readonly header: Record<string, unknown>
  readonly payload: Record<string, any>
  readonly signingInput: string
  readonly signature: Buffer
}

/** Splits a JWS compact serialisation and base64url-decodes its header and payload. */
export const decodeJwt = (token: string): DecodedJwt => {
  const parts = token.split(".")
  if (parts.length !== 3) throw new Error(`not a JWS compact serialisation: ${parts.length} parts`)
  const [header, payload, signature] = parts as [string, string, string]
  return {
    header: JSON.parse(Buffer.from(header, "base64url").toString("utf8")),
    payload: JSON.parse(Buffer.from(payload, "base64url").toString("utf8")),
    signingInput: `${header}.${payload}`,
    signature: Buffer.from(signature, "base64url")
  }
}

/** RS256 verification with node:crypto alone, from a JWK as published in the JWKS. */
export const verifyRs256 = (token: string, jwk: JsonWebKey): boolean => {
  const { signingInput, signature } = decodeJwt(token)
  const key = createPublicKey({ key: jwk, format: "jwk" })
  return verify("RSA-SHA256", Buffer.from(signingInput, "utf8"), key, signature)
}

/** The exact OAuth error body: `{"error","error_description"}`; any description when none is given. */
export const oauthError = (error: string, description?: string) => ({
  error,
  error_description: description ?? (expect.any(String) as unknown as string)
})
