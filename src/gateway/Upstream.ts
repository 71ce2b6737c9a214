/**
 * The proxy's HTTP client: POSTs a service call's JSON body to its upstream and reads back a JSON
 * object, over keep-alive connections pooled per upstream origin (bounded: at most
 * MAX_SOCKETS_PER_UPSTREAM open to one origin, MAX_IDLE_PER_UPSTREAM kept idle). Redirects are never
 * followed; any status but 2xx, a body that is not a JSON object, an unreachable upstream or one
 * slower than the timeout is a 502 (`BadGateway`).
 *
 * Plain node:http rather than `fetch`: a profile of proxied calls put most of the proxy's own time
 * in fetch's per-request machinery (WHATWG streams, Request/Response objects). The request headers
 * are built in one place (`requestHeaders`) and the answer is mapped in one place (`answerOf`), so
 * headers to add and statuses to pass through are one edit each.
 */
import { Either } from "effect"
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import { BadGateway } from "../domain/Errors.js"

export type JsonObject = { readonly [key: string]: unknown }

const MAX_SOCKETS_PER_UPSTREAM = 128
const MAX_IDLE_PER_UPSTREAM = 32
/** Beyond this many upstream origins, the least recently added pool is closed. */
const MAX_UPSTREAMS = 1_000

/** What the upstream said, for its span: its status when it answered at all. */
export interface UpstreamAnswer {
  readonly status: number | undefined
  readonly result: Either.Either<JsonObject, BadGateway>
}

const unreachable = new BadGateway({ description: "The upstream service is unreachable or did not answer a JSON object" })
const timedOut = (timeoutMs: number) =>
  new BadGateway({ description: `The upstream service did not answer within ${timeoutMs} ms` })

const pools = new Map<string, HttpAgent>()
const poolFor = (url: URL): HttpAgent => {
  let agent = pools.get(url.origin)
  if (agent === undefined) {
    if (pools.size >= MAX_UPSTREAMS) {
      const [oldest, pool] = pools.entries().next().value!
      pools.delete(oldest)
      pool.destroy()
    }
    const options = { keepAlive: true, maxSockets: MAX_SOCKETS_PER_UPSTREAM, maxFreeSockets: MAX_IDLE_PER_UPSTREAM }
    agent = url.protocol === "https:" ? new HttpsAgent(options) : new HttpAgent(options)
    pools.set(url.origin, agent)
  }
  return agent
}

/** Parsed once per distinct URL: the catalogue holds few. Undefined for a URL the proxy cannot call. */
const parsedUrls = new Map<string, URL | undefined>()
const parseUpstream = (url: string): URL | undefined => {
  if (parsedUrls.has(url)) return parsedUrls.get(url)
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
    // As fetch did: only http(s), and never credentials in the URL.
    if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.username !== "" || parsed.password !== "") {
      parsed = undefined
    }
  } catch {
    parsed = undefined
  }
  if (parsedUrls.size >= MAX_UPSTREAMS) parsedUrls.clear()
  parsedUrls.set(url, parsed)
  return parsed
}

/** The headers the upstream gets: the body's type and length, what we accept, and `extra` (a traceparent...). */
const requestHeaders = (body: Buffer, extra: Readonly<Record<string, string>>) => ({
  "content-type": "application/json",
  accept: "application/json",
  "content-length": String(body.length),
  ...extra
})

const isJsonObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The upstream's answer as the caller's: a 2xx JSON object, or a 502. */
const answerOf = (status: number, text: string): Either.Either<JsonObject, BadGateway> => {
  if (status < 200 || status > 299) return Either.left(unreachable)
  try {
    // As fetch's text() did, a UTF-8 byte order mark is not part of the text.
    const json: unknown = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
    return isJsonObject(json) ? Either.right(json) : Either.left(unreachable)
  } catch {
    return Either.left(unreachable)
  }
}

/**
 * POSTs `body` (JSON text, sent as it was validated) to `url`. Never rejects; `signal` aborts the
 * exchange (the caller was interrupted) and it then answers a 502 nobody reads.
 */
export const postJson = (
  url: string,
  body: string,
  options: {
    readonly timeoutMs: number
    readonly headers?: Readonly<Record<string, string>>
    readonly signal?: AbortSignal
  }
): Promise<UpstreamAnswer> =>
  new Promise((resolve) => {
    const target = parseUpstream(url)
    if (target === undefined) return resolve({ status: undefined, result: Either.left(unreachable) })
    const payload = Buffer.from(body)
    let status: number | undefined
    let settled = false
    const settle = (result: Either.Either<JsonObject, BadGateway>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      options.signal?.removeEventListener("abort", abort)
      resolve({ status, result })
    }
    const send = target.protocol === "https:" ? httpsRequest : httpRequest
    const outgoing = send(target, { method: "POST", agent: poolFor(target), headers: requestHeaders(payload, options.headers ?? {}) })
    // The whole exchange, answer body included, within the timeout.
    const timer = setTimeout(() => {
      settle(Either.left(timedOut(options.timeoutMs)))
      outgoing.destroy()
    }, options.timeoutMs)
    const abort = () => {
      settle(Either.left(unreachable))
      outgoing.destroy()
    }
    options.signal?.addEventListener("abort", abort, { once: true })
    outgoing.once("error", () => settle(Either.left(unreachable)))
    outgoing.once("response", (incoming: IncomingMessage) => {
      status = incoming.statusCode
      const chunks: Array<Buffer> = []
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
      incoming.once("end", () => settle(answerOf(status ?? 0, Buffer.concat(chunks).toString("utf8"))))
      incoming.once("error", () => settle(Either.left(unreachable)))
      incoming.once("aborted", () => settle(Either.left(unreachable)))
    })
    outgoing.end(payload)
  })
