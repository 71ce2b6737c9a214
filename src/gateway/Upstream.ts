/**
 * The proxy's HTTP client: POSTs a service call's JSON body to its upstream and reads back a JSON
 * object, over keep-alive connections pooled per upstream origin (bounded: at most
 * MAX_SOCKETS_PER_UPSTREAM open to one origin, MAX_IDLE_PER_UPSTREAM kept idle). Redirects are never
 * followed. What the upstream answered becomes the caller's answer in one place (`resultOf`): a 2xx
 * JSON object is the answer; 400, 404, 409, 422 and 429 with a JSON object are passed on (429 with
 * its `Retry-After`); anything else, a body that is not a JSON object, an unreachable upstream or one
 * slower than the timeout is a 502 (`BadGateway`), and a 5xx, a timeout or a connection failure is
 * also a failure the circuit breaker counts (`UpstreamGuard`).
 *
 * Plain node:http rather than `fetch`: a profile of proxied calls put most of the proxy's own time
 * in fetch's per-request machinery (WHATWG streams, Request/Response objects). The headers are
 * given whole by the caller (`UpstreamGateway`): nothing of the caller's request travels unless put
 * there.
 */
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import { BadGateway } from "../domain/Errors.js"

export type JsonObject = { readonly [key: string]: unknown }

const MAX_SOCKETS_PER_UPSTREAM = 128
/**
 * As many as may be open: a pool that keeps fewer idle than its callers use at once closes and
 * reopens connections all the time under steady load (at 32 with 50 concurrent calls, a profile
 * showed connects and closes on every burst; at 128, proxy calls ran ~10% faster, p99 ~25% lower).
 * Idle connections still end when the upstream's keep-alive timeout closes them.
 */
const MAX_IDLE_PER_UPSTREAM = MAX_SOCKETS_PER_UPSTREAM
/** Beyond this many upstream origins, the least recently added pool is closed. */
const MAX_UPSTREAMS = 1_000

/** Statuses whose JSON object answer the caller gets as it is. */
const PASSED_ON = new Set([400, 404, 409, 422, 429])

export type UpstreamResult =
  | { readonly _tag: "Ok"; readonly body: JsonObject }
  | { readonly _tag: "PassedOn"; readonly status: number; readonly body: JsonObject; readonly retryAfter: string | undefined }
  /** `failing`: a 5xx, a timeout or a connection failure, which the breaker counts. */
  | { readonly _tag: "Failed"; readonly error: BadGateway; readonly failing: boolean }

/** What the upstream said, for its span: its status when it answered at all. */
export interface UpstreamAnswer {
  readonly status: number | undefined
  readonly result: UpstreamResult
}

const unreachable = new BadGateway({ description: "The upstream service is unreachable or did not answer a JSON object" })
const timedOut = (timeoutMs: number) =>
  new BadGateway({ description: `The upstream service did not answer within ${timeoutMs} ms` })

const isJsonObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const failed = (error: BadGateway, failing: boolean): UpstreamResult => ({ _tag: "Failed", error, failing })
const connectionFailed = failed(unreachable, true)

/** A `Retry-After` worth passing on: delay-seconds or an HTTP-date (RFC 9110 §10.2.3). */
const retryAfterOf = (value: string | undefined): string | undefined =>
  value !== undefined && (/^\d{1,10}$/.test(value) || (value.length <= 64 && /^[A-Za-z0-9 ,:]+$/.test(value) && !Number.isNaN(Date.parse(value))))
    ? value
    : undefined

/** The upstream's answer as the caller's (see the module's comment). */
const resultOf = (status: number, text: string, retryAfter: string | undefined): UpstreamResult => {
  const ok = status >= 200 && status <= 299
  if (!ok && !PASSED_ON.has(status)) return failed(unreachable, status >= 500)
  let json: unknown
  try {
    // As fetch's text() did, a UTF-8 byte order mark is not part of the text.
    json = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
  } catch {
    return failed(unreachable, false)
  }
  if (!isJsonObject(json)) return failed(unreachable, false)
  return ok
    ? { _tag: "Ok", body: json }
    : { _tag: "PassedOn", status, body: json, retryAfter: status === 429 ? retryAfterOf(retryAfter) : undefined }
}

/**
 * Registers what to do when the caller leaves (at once if it has already left) and returns how to
 * forget it: a callback, not an `AbortSignal`, whose making cost about 2% of a proxied call's CPU
 * in a profile of the fast lane.
 */
export type WhenCallerGone = (leave: () => void) => () => void

/** `WhenCallerGone` for an `AbortSignal` (Effect's interruption of the app's handler). */
export const whenAborted = (signal: AbortSignal): WhenCallerGone => (leave) => {
  if (signal.aborted) {
    leave()
    return () => {}
  }
  signal.addEventListener("abort", leave, { once: true })
  return () => signal.removeEventListener("abort", leave)
}

/** The upstream client's two operations: a call, and closing every pooled connection. */
export interface UpstreamClient {
  readonly postJson: (
    url: string,
    body: string,
    options: {
      readonly timeoutMs: number
      /** Every header the upstream gets but the body's length. */
      readonly headers: Readonly<Record<string, string>>
      /** The caller's leaving, which aborts the exchange. */
      readonly whenCallerGone?: WhenCallerGone
    }
  ) => Promise<UpstreamAnswer>
  /** Closes the pools' connections (at shutdown: `UpstreamGateway`'s scope). */
  readonly close: () => void
}

/**
 * A client with pools of its own: owned by `UpstreamGateway`'s layer, so two servers in one process
 * share no connection, and a server stopped leaves none open.
 */
export const makeUpstreamClient = (): UpstreamClient => {
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

  /**
   * POSTs `body` (JSON text, sent as it was validated) to `url`. Never rejects; the caller's leaving
   * (`whenCallerGone`) aborts the exchange, which then answers a 502 nobody reads.
   */
  const postJson: UpstreamClient["postJson"] = (url, body, options) =>
    new Promise((resolve) => {
      const target = parseUpstream(url)
      // The caller gone before anything was sent: nothing is.
      let gone = false
      let leave = () => void (gone = true)
      const forget = options.whenCallerGone?.(() => leave())
      if (target === undefined || gone) {
        forget?.()
        return resolve({ status: undefined, result: failed(unreachable, false) })
      }
      const payload = Buffer.from(body)
      let status: number | undefined
      let settled = false
      const settle = (result: UpstreamResult) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        forget?.()
        resolve({ status, result })
      }
      const send = target.protocol === "https:" ? httpsRequest : httpRequest
      const outgoing = send(target, { method: "POST", agent: poolFor(target), headers: { ...options.headers, "content-length": String(payload.length) } })
      // The whole exchange, answer body included, within the timeout.
      const timer = setTimeout(() => {
        settle(failed(timedOut(options.timeoutMs), true))
        outgoing.destroy()
      }, options.timeoutMs)
      leave = () => {
        // The caller went away: not the upstream's failure.
        settle(failed(unreachable, false))
        outgoing.destroy()
      }
      outgoing.once("error", () => settle(connectionFailed))
      outgoing.once("response", (incoming: IncomingMessage) => {
        status = incoming.statusCode
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.once("end", () => settle(resultOf(status ?? 0, Buffer.concat(chunks).toString("utf8"), incoming.headers["retry-after"])))
        incoming.once("error", () => settle(connectionFailed))
        incoming.once("aborted", () => settle(connectionFailed))
      })
      outgoing.end(payload)
    })

  const close = () => {
    for (const pool of pools.values()) pool.destroy()
    pools.clear()
    parsedUrls.clear()
  }
  return { postJson, close }
}
