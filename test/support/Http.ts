/**
 * Raw HTTP helpers for the full-stack tests: `rawRequest`, the one raw client (node:http, bytes
 * exactly as given: arbitrary bodies and headers, unnormalised paths, chunked bodies still arriving,
 * a chosen source address, with a deadline), requests the typed helpers of `TestServer.ts` cannot
 * express, HTTP Basic client authentication, and independent decoding and verification of JWTs.
 */
import { HttpBody, HttpClientRequest } from "@effect/platform"
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { createPublicKey, type JsonWebKey, randomBytes, verify } from "node:crypto"
import * as NodeHttp from "node:http"
import { ADMIN_TOKEN, type JsonResponse, send, serverPort } from "../../src/testing.js"

/** A string whose latin-1 code units are the UTF-8 bytes of `value` (what node:http writes as is). */
export const latin1 = (value: string | Uint8Array): string =>
  Buffer.from(typeof value === "string" ? Buffer.from(value, "utf8") : value).toString("latin1")

export interface RawRequest {
  readonly method: string
  /** Sent byte for byte (latin-1 string: use `latin1` to put UTF-8 bytes on the wire). */
  readonly path: string
  readonly headers?: Readonly<Record<string, string | ReadonlyArray<string>>>
  readonly body?: Uint8Array | string
  /** Send the body with Transfer-Encoding: chunked (no Content-Length), in pieces. */
  readonly chunked?: boolean
  /** Instead of `body`: these pieces, chunked, `pauseMs` apart (a body still arriving), until answered. */
  readonly pieces?: ReadonlyArray<string>
  readonly pauseMs?: number
  /** The local address to connect from (brute-force counting is per address). */
  readonly localAddress?: string
  readonly timeoutMs?: number
}

export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly text: string
  readonly ms: number
}

/**
 * One request on its own connection. Resolves with the answer once it is complete; rejects when
 * there is no complete answer within the deadline (a hang) or the connection fails before one.
 * An error while still writing the body after the answer arrived (the server refused early) is
 * ignored: the answer is what counts.
 */
export const rawRequest = (port: number, request: RawRequest): Promise<RawResponse> =>
  new Promise<RawResponse>((resolve, reject) => {
    const started = Date.now()
    // A hang's deadline, not a speed limit: a busy machine can take seconds to answer.
    const timeoutMs = request.timeoutMs ?? 15_000
    let settled = false
    const finish = (result: RawResponse | Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (result instanceof Error) reject(result)
      else resolve(result)
    }
    const body = request.body === undefined
      ? undefined
      : typeof request.body === "string"
      ? Buffer.from(request.body, "utf8")
      : Buffer.from(request.body)
    const headers: Record<string, string | Array<string>> = {}
    for (const [name, value] of Object.entries(request.headers ?? {})) {
      headers[name] = typeof value === "string" ? value : [...value]
    }
    const chunked = request.chunked === true || request.pieces !== undefined
    if (body !== undefined && !chunked) headers["content-length"] = String(body.length)
    if (chunked) headers["transfer-encoding"] = "chunked"

    let answered = false
    const outgoing = NodeHttp.request(
      {
        host: "127.0.0.1",
        port,
        method: request.method,
        path: request.path,
        headers,
        agent: false,
        ...(request.localAddress === undefined ? {} : { localAddress: request.localAddress })
      },
      (incoming) => {
        answered = true
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.on("error", (error) => finish(error))
        incoming.on("end", () => {
          const responseHeaders: Record<string, string> = {}
          for (const [name, value] of Object.entries(incoming.headers)) {
            if (value !== undefined) responseHeaders[name] = Array.isArray(value) ? value.join(", ") : value
          }
          finish({
            status: incoming.statusCode ?? 0,
            headers: responseHeaders,
            text: Buffer.concat(chunks).toString("utf8"),
            ms: Date.now() - started
          })
          outgoing.destroy()
        })
      }
    )
    const timer = setTimeout(() => {
      finish(new Error(`no answer within ${timeoutMs} ms: ${request.method} ${request.path.slice(0, 200)}`))
      outgoing.destroy()
    }, timeoutMs)
    outgoing.on("error", (error) => {
      // EPIPE/ECONNRESET while the body is still being written: wait for the answer (or the deadline).
      const code = (error as NodeJS.ErrnoException).code
      if (code === "EPIPE" || code === "ECONNRESET") return
      finish(error)
    })
    if (request.pieces !== undefined) {
      const pieces = request.pieces
      const writeFrom = (index: number): void => {
        if (answered || outgoing.destroyed) return
        if (index >= pieces.length) return void outgoing.end()
        outgoing.write(pieces[index]!)
        if ((request.pauseMs ?? 0) === 0) writeFrom(index + 1)
        else setTimeout(() => writeFrom(index + 1), request.pauseMs)
      }
      writeFrom(0)
    } else if (body === undefined) {
      outgoing.end()
    } else if (request.chunked) {
      const piece = 64 * 1024
      let offset = 0
      const pump = () => {
        while (offset < body.length) {
          const next = body.subarray(offset, offset + piece)
          offset += piece
          if (!outgoing.write(next)) {
            outgoing.once("drain", pump)
            return
          }
        }
        outgoing.end()
      }
      pump()
    } else {
      outgoing.end(body)
    }
  })

/** A raw answer as the typed helpers give it: the body parsed when it is JSON. */
export const asJsonResponse = (answer: RawResponse): JsonResponse => {
  let body: unknown = undefined
  try {
    body = answer.text === "" ? undefined : JSON.parse(answer.text)
  } catch {
    body = undefined
  }
  return { status: answer.status, headers: answer.headers, body, text: answer.text }
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
 * resolves `..` and `%2E%2E` segments before sending; `rawRequest` does not.
 */
export const unnormalizedRequest = (method: string, path: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(serverPort, (port) => Effect.promise(() => rawRequest(port, { method, path, headers }))).pipe(
    Effect.map(asJsonResponse)
  )

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

/** A well-formed client id that no credential has: fresh each time, so no brute-force limit is reached. */
export const unknownClientId = (): string => `svc_${randomBytes(16).toString("hex")}`

/** An answer with this status and exactly this `{"error","error_description"}` body, as JSON. */
export const expectErrorBody = (
  response: { readonly status: number; readonly body: unknown; readonly headers: Readonly<Record<string, string | undefined>> },
  status: number,
  body: { readonly error: string; readonly error_description: string }
) => {
  expect({ status: response.status, body: response.body }).toEqual({ status, body })
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}

/** The exact OAuth error body: `{"error","error_description"}`; any description when none is given. */
export const oauthError = (error: string, description?: string) => ({
  error,
  error_description: description ?? (expect.any(String) as unknown as string)
})

/** The admin API with `token` as the bearer token (JSON bodies), for tests that act as several tokens. */
export const adminAs = (token: string) => {
  const call = (method: "GET" | "PUT" | "POST" | "DELETE", path: string, body?: unknown) =>
    request(method, path, {
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body), contentType: "application/json" })
    })
  return {
    get: (path: string) => call("GET", path),
    put: (path: string, body: unknown = {}) => call("PUT", path, body),
    post: (path: string, body: unknown = {}) => call("POST", path, body),
    delete: (path: string) => call("DELETE", path)
  }
}
