/**
 * The proxy's HTTP client: POSTs a service call's JSON body to its upstream and reads back a JSON
 * object, over keep-alive connections pooled per upstream origin (bounded: at most
 * MAX_SOCKETS_PER_UPSTREAM open to one origin). Redirects are never
 * followed. What the upstream answered becomes the caller's answer in one place (`resultOf`): a 2xx
 * JSON object is the answer; 400, 404, 409, 422 and 429 with a JSON object are passed on (429 with
 * its `Retry-After`); anything else, a body that is not a JSON object, an unreachable upstream or one
 * slower than the timeout is a 502 (`BadGateway`), and a 5xx, a timeout or a connection failure is
 * also a failure the circuit breaker counts (`UpstreamGuard`).
 *
 * undici's `Pool.dispatch` rather than `fetch` or node:http's client: a profile of proxied calls put
 * most of the proxy's own time in fetch's per-request machinery (WHATWG streams, Request/Response
 * objects), and node:http's `ClientRequest`, agent and socket events cost about 18 µs more per call
 * than a dispatch (measured at 2,000 calls/s on a bare proxy). The headers are given whole by the
 * caller (`UpstreamGateway`): nothing of the caller's request travels unless put there.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns"
import { type Dispatcher, Pool } from "undici"
import { BadGateway } from "../../domain/Errors.js"
import { internalAddressKind } from "../../domain/InternalAddresses.js"
import { resolvedToInternal } from "../../domain/UpstreamPolicy.js"

export type JsonObject = { readonly [key: string]: unknown }

/**
 * At most this many connections open to one upstream origin, kept alive between calls: a pool that
 * keeps fewer than its callers use at once closes and reopens connections all the time under steady
 * load (at 32 with 50 concurrent calls, a profile showed connects and closes on every burst). Idle
 * connections end after the upstream's keep-alive hint (undici's default when it gives none).
 */
const MAX_SOCKETS_PER_UPSTREAM = 128
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
/** A guarded upstream's name resolved to an internal address: no connection was made. */
export const addressNotAllowed = new BadGateway({ description: "The upstream address is not allowed for this service" })

/** Why a guarded connection was not made (`guardedLookup`); never shown to the caller. */
export class InternalAddressRefused extends Error {
  readonly code = "ERR_UPSTREAM_ADDRESS_REFUSED"
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<LookupAddress>, family?: number) => void

/**
 * `net.connect`'s `lookup` for a guarded upstream: the name is resolved as usual, and the
 * connection is refused when any address it resolves to is internal (`InternalAddresses`). Checked
 * at every connection, so a name that resolves elsewhere after the URL was saved (DNS rebinding)
 * cannot reach an internal address. Address literals never reach a lookup: they are judged when the
 * URL is (`UpstreamPolicy`).
 */
export const guardedLookup =
  (onRefused: (reason: string) => void) => (hostname: string, options: object, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) return callback(error, [])
      for (const { address } of addresses) {
        const kind = internalAddressKind(address)
        if (kind !== undefined) {
          const reason = resolvedToInternal(hostname, address, kind)
          onRefused(reason)
          return callback(Object.assign(new InternalAddressRefused(reason), { code: "ERR_UPSTREAM_ADDRESS_REFUSED" }), [])
        }
      }
      if ((options as { readonly all?: boolean }).all === true) return callback(null, addresses)
      const first = addresses[0]
      if (first === undefined) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), [])
      callback(null, first.address, first.family)
    })
  }
const timedOut = (timeoutMs: number) => new BadGateway({ description: `The upstream service did not answer within ${timeoutMs} ms` })

/** An upstream URL parsed once: where to connect, and the path (with its query) to POST to. */
interface UpstreamTarget {
  /** Where to connect (`URL.origin` works its text out anew on every read). */
  readonly origin: string
  readonly path: string
}

/** Why an exchange is cut short by this side (a timeout, the caller gone): never seen by anyone. */
const stopped = new Error("upstream exchange stopped")

/** A header's value among undici's raw `[name, value, …]` pairs; the first when repeated. */
const headerOf = (rawHeaders: ReadonlyArray<Buffer | string> | null, name: string): string | undefined => {
  if (rawHeaders === null) return undefined
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toString().toLowerCase() === name) return rawHeaders[i + 1]!.toString("latin1")
  }
  return undefined
}

const isJsonObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value)

const failed = (error: BadGateway, failing: boolean): UpstreamResult => ({ _tag: "Failed", error, failing })
const connectionFailed = failed(unreachable, true)
const addressRefused = failed(addressNotAllowed, false)

/** A `Retry-After` worth passing on: delay-seconds or an HTTP-date (RFC 9110 §10.2.3). */
const retryAfterOf = (value: string | undefined): string | undefined =>
  value !== undefined &&
    (/^\d{1,10}$/.test(value) || (value.length <= 64 && /^[A-Za-z0-9 ,:]+$/.test(value) && !Number.isNaN(Date.parse(value))))
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

/** The upstream client's two operations: a call, and closing every pooled connection. */
export interface UpstreamClient {
  readonly postJson: (
    url: string,
    body: string,
    options: {
      readonly timeoutMs: number
      /** Every header the upstream gets but the body's length, which is added to this object. */
      readonly headers: Record<string, string>
      /** The caller's leaving, which aborts the exchange. */
      readonly whenCallerGone?: WhenCallerGone
      /**
       * Connect only to public addresses, checked when each connection is made (`guardedLookup`);
       * such calls have pools of their own, never sharing a connection with unguarded calls.
       */
      readonly guarded?: boolean
    }
  ) => Promise<UpstreamAnswer>
  /** Closes the pools' connections (at shutdown: `UpstreamGateway`'s scope). */
  readonly close: () => void
}

/**
 * A client with pools of its own: owned by `UpstreamGateway`'s layer, so two servers in one process
 * share no connection, and a server stopped leaves none open.
 */
export const makeUpstreamClient = (onRefused: (reason: string) => void = () => {}): UpstreamClient => {
  const pools = new Map<string, Pool>()
  const lookup = guardedLookup(onRefused)
  const poolFor = (origin: string, guarded: boolean): Pool => {
    const key = guarded ? `guarded ${origin}` : origin
    let pool = pools.get(key)
    if (pool === undefined) {
      if (pools.size >= MAX_UPSTREAMS) {
        const [oldest, evicted] = pools.entries().next().value!
        pools.delete(oldest)
        void evicted.destroy().catch(() => {})
      }
      // The exchange's own timer bounds it (`postJson`): undici's timeouts are off.
      pool = new Pool(origin, {
        connections: MAX_SOCKETS_PER_UPSTREAM,
        headersTimeout: 0,
        bodyTimeout: 0,
        ...(guarded ? { connect: { lookup } } : {})
      })
      pools.set(key, pool)
    }
    return pool
  }

  /** Parsed once per distinct URL: the catalogue holds few. Undefined for a URL the proxy cannot call. */
  const parsedUrls = new Map<string, UpstreamTarget | undefined>()
  const parseUpstream = (url: string): UpstreamTarget | undefined => {
    if (parsedUrls.has(url)) return parsedUrls.get(url)
    let parsed: UpstreamTarget | undefined
    try {
      const target = new URL(url)
      // As fetch did: only http(s), and never credentials in the URL.
      if ((target.protocol === "http:" || target.protocol === "https:") && target.username === "" && target.password === "") {
        parsed = { origin: target.origin, path: `${target.pathname}${target.search}` }
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
      let leave: () => void = () => void (gone = true)
      const forget = options.whenCallerGone?.(() => leave())
      if (target === undefined || gone) {
        forget?.()
        return resolve({ status: undefined, result: failed(unreachable, false) })
      }
      const payload = Buffer.from(body)
      let status: number | undefined
      let retryAfter: string | undefined
      let settled = false
      let abort: ((reason?: Error) => void) | undefined
      const settle = (result: UpstreamResult) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        forget?.()
        resolve({ status, result })
      }
      const stop = (result: UpstreamResult) => {
        settle(result)
        abort?.(stopped)
      }
      // The whole exchange, answer body included, within the timeout.
      const timer = setTimeout(() => stop(failed(timedOut(options.timeoutMs), true)), options.timeoutMs)
      // The caller went away: not the upstream's failure.
      leave = () => stop(failed(unreachable, false))
      const chunks: Array<Buffer> = []
      const handler: Dispatcher.DispatchHandler = {
        onConnect: (abortExchange) => {
          abort = abortExchange
          if (settled) abortExchange(stopped)
        },
        onHeaders: (statusCode, rawHeaders) => {
          status = statusCode
          if (statusCode === 429) retryAfter = headerOf(rawHeaders, "retry-after")
          return true
        },
        onData: (chunk) => {
          chunks.push(chunk)
          return true
        },
        onComplete: () => settle(resultOf(status ?? 0, Buffer.concat(chunks).toString("utf8"), retryAfter)),
        // A guarded name that resolved to an internal address: refused, not the upstream's failure.
        onError: (error) =>
          settle((error as { readonly code?: unknown }).code === "ERR_UPSTREAM_ADDRESS_REFUSED" ? addressRefused : connectionFailed)
      }
      options.headers["content-length"] = String(payload.length)
      try {
        poolFor(target.origin, options.guarded === true).dispatch({
          origin: target.origin,
          path: target.path,
          method: "POST",
          headers: options.headers,
          body: payload
        }, handler)
      } catch {
        settle(connectionFailed)
      }
    })

  const close = () => {
    for (const pool of pools.values()) void pool.destroy().catch(() => {})
    pools.clear()
    parsedUrls.clear()
  }
  return { postJson, close }
}
