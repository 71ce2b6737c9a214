/**
 * What one client can hold of the server: time limits on receiving a request, and a cap on the
 * connections open from one client address. Both servers that listen on PORT (`EarlyPort` during
 * start-up, `NodeServer` after) are made with them, so the fast lane and the app are behind them.
 *
 * - HEADERS_TIMEOUT_MS: the request line and headers must have arrived within it, from the
 *   connection's first byte (or the previous request's end on a kept-alive connection);
 * - REQUEST_TIMEOUT_MS: the whole request, headers and body, within it. Node checks both
 *   (`headersTimeout`, `requestTimeout`) every `connectionsCheckingInterval`, set here to at most a
 *   second (Node's default is 30 s). A request cut off gets `408 invalid_request` when no answer
 *   has begun (`ClientErrors`), and its connection is closed. Nothing limits the time the server
 *   takes to answer once the request has arrived (a proxy's upstream has UPSTREAM_TIMEOUT_MS);
 * - MAX_CONNECTIONS_PER_ADDRESS: connections open at once from one TCP peer that is not a trusted
 *   proxy. One more is closed as it is accepted, before anything is read: answering it would mean
 *   reading it, which is what the cap is there to avoid. Connections from TRUSTED_PROXIES carry
 *   many clients and are not counted; their requests are, by the client address they forward
 *   (`ClientAddress`), while they are being received and answered: one over the cap is answered
 *   `503 temporarily_unavailable` with `Retry-After` and that connection closed.
 *
 * A Map increment on connect and a decrement on close: nothing on the hot path per request unless
 * TRUSTED_PROXIES is set.
 */
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import type { TrustedProxies } from "./ClientAddress.js"

export interface ConnectionLimits {
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly maxConnectionsPerAddress: number
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 20_000,
  maxConnectionsPerAddress: 128
}

/** `createServer` options: Node's time limits, checked often enough to hold them to the second. */
export const serverOptions = (limits: ConnectionLimits): ServerOptions => ({
  headersTimeout: limits.headersTimeoutMs,
  requestTimeout: limits.requestTimeoutMs,
  connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4)))
})

const OVER_CAP_BODY = JSON.stringify({
  error: "temporarily_unavailable",
  error_description: "Too many open connections from this client address"
})

/** Counts what is open per client address; `admit` says whether one more fits, `release` undoes it. */
const makeCounter = (cap: number) => {
  const open = new Map<string, number>()
  return {
    admit: (address: string): boolean => {
      const count = open.get(address) ?? 0
      if (count >= cap) return false
      open.set(address, count + 1)
      return true
    },
    release: (address: string): void => {
      const count = open.get(address) ?? 1
      if (count <= 1) open.delete(address)
      else open.set(address, count - 1)
    }
  }
}

export interface ConnectionCap {
  /**
   * For a request from a trusted proxy, counted by its forwarded client address until answered:
   * false when it was over the cap and has been answered 503 (the caller then does nothing more).
   */
  readonly admitForwarded: (request: IncomingMessage, response: ServerResponse, client: string) => boolean
}

/** Caps the connections of `server` per TCP peer (trusted proxies aside); see the module comment. */
export const capConnections = (server: Server, cap: number, proxies: TrustedProxies): ConnectionCap => {
  const counter = makeCounter(cap)
  server.on("connection", (socket: Socket) => {
    const peer = socket.remoteAddress
    if (peer === undefined || proxies.isTrusted(peer)) return
    if (!counter.admit(peer)) return void socket.destroy()
    socket.once("close", () => counter.release(peer))
  })
  return {
    admitForwarded: (request, response, client) => {
      if (counter.admit(client)) {
        response.once("close", () => counter.release(client))
        return true
      }
      // Node discards the unread body; the proxy opens a new connection for its next request.
      request.resume()
      response.writeHead(503, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(OVER_CAP_BODY),
        "retry-after": "1",
        connection: "close"
      })
      response.end(OVER_CAP_BODY)
      return false
    }
  }
}
