/**
 * The port opened while the storage starts, so `GET /healthz` (the process is up) answers 200 from
 * the moment what needs no database has been checked, instead of after PostgreSQL (embedded or
 * not) has been opened, migrated and the keys loaded: on an embedded data directory that is most of
 * a start.
 *
 * Nothing else is answered early, and nothing is refused: every other request waits, held as Node
 * parsed it (its body unread), and the real server (`NodeServer`) adopts this same `Server` once it
 * is ready and hands it the held requests, which are then answered as if they had just arrived.
 * A client that waited for `/healthz` therefore never sees a request fail because it came too soon.
 * A request held longer than `HOLD_LIMIT_MS`, or held when the start fails or is stopped, is
 * answered 503 `temporarily_unavailable` with `Retry-After` (the contract's answer during start-up),
 * so no connection is accepted and left unanswered.
 *
 * Only for plain HTTP: with TLS the port opens when the server is ready, as before. The open port
 * is a value (`EarlyPort`) that `ServerMain.ts` hands to the server (`ServerOptions.earlyPort`): nothing of
 * it is module state, so a program that starts two servers gives each its own.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { SERVICE_VERSION } from "../config/Version.js"
import { answerClientErrors } from "./ClientErrors.js"
import { type ConnectionCap, capConnections, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS, serverOptions } from "./ConnectionLimits.js"
import { NO_TRUSTED_PROXIES, type TrustedProxies } from "./ClientAddress.js"

/** Far beyond a start on a fresh data directory; a client's own timeout usually comes first. */
export const HOLD_LIMIT_MS = 30_000

interface Held {
  readonly request: IncomingMessage
  readonly response: ServerResponse
  readonly timer: NodeJS.Timeout
}

/** A port open while the storage starts, until a server takes it over or it is closed. */
export interface EarlyPort {
  readonly host: string
  readonly port: number
  /** The listening server, for the real one to take over. */
  readonly server: Server
  /** The cap on connections per client address, counted from the first connection on. */
  readonly cap: ConnectionCap
  /**
   * Does in one synchronous step what no request may fall between: detaches the early handlers,
   * lets `attach` put the server's own on, and hands them the requests held so far. After it,
   * `close` does nothing: the server drains the port as it would any other.
   */
  readonly takeOver: (attach: () => void) => void
  /** A start that failed or was stopped: the held requests get their 503, then the port closes. */
  readonly close: () => Promise<void>
}

/** The same bytes as the app's `GET /healthz` (DiscoveryHttp), headers included. */
const HEALTHY = JSON.stringify({ status: "ok", version: SERVICE_VERSION })

const isHealthz = (request: IncomingMessage) =>
  (request.method === "GET" || request.method === "HEAD") && (request.url ?? "").split("?", 1)[0] === "/healthz"

const answerStarting = (response: ServerResponse): Promise<void> =>
  new Promise((resolve) => {
    if (response.writableEnded || response.destroyed) return resolve()
    const body = JSON.stringify({
      error: "temporarily_unavailable",
      error_description: "The server is starting; retry shortly"
    })
    response.once("close", () => resolve())
    response.writeHead(503, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "retry-after": "1",
      connection: "close"
    })
    response.end(body)
  })

/**
 * Listens on `host`:`port` while the storage starts; undefined when the port could not be had (the
 * server's own listen then reports why, as without this).
 */
export const openEarlyPort = (
  host: string,
  port: number,
  limits: ConnectionLimits & { readonly trustedProxies: TrustedProxies } = {
    ...DEFAULT_CONNECTION_LIMITS,
    trustedProxies: NO_TRUSTED_PROXIES
  }
): Promise<EarlyPort | undefined> =>
  new Promise((resolve) => {
    // The server's own limits from the first connection: it is the same `Server` later.
    const server = createServer(serverOptions(limits))
    const cap = capConnections(server, limits.maxConnectionsPerAddress, limits.trustedProxies)
    const held = new Set<Held>()
    let open = true
    answerClientErrors(server)
    const clientError = server.listeners("clientError")[0] as (...args: Array<any>) => void
    const request = (request: IncomingMessage, response: ServerResponse) => {
      if (isHealthz(request)) {
        response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(HEALTHY) })
        response.end(request.method === "HEAD" ? undefined : HEALTHY)
        return
      }
      const entry: Held = {
        request,
        response,
        timer: setTimeout(() => {
          held.delete(entry)
          void answerStarting(response)
        }, HOLD_LIMIT_MS)
      }
      held.add(entry)
      response.once("close", () => {
        clearTimeout(entry.timer)
        held.delete(entry)
      })
    }
    const takeOver = (attach: () => void) => {
      if (!open) return
      open = false
      server.off("request", request)
      server.off("clientError", clientError)
      attach()
      const waiting = [...held]
      held.clear()
      for (const { request, response, timer } of waiting) {
        clearTimeout(timer)
        if (!response.writableEnded && !request.socket.destroyed) server.emit("request", request, response)
      }
    }
    const close = async () => {
      if (!open) return
      open = false
      const waiting = [...held]
      held.clear()
      server.close()
      await Promise.race([
        Promise.all(waiting.map(({ response, timer }) => (clearTimeout(timer), answerStarting(response)))),
        new Promise((resolve) => setTimeout(resolve, 1_000).unref())
      ])
      server.closeAllConnections()
    }
    server.on("request", request)
    server.once("error", () => {
      server.close()
      resolve(undefined)
    })
    server.listen({ host, port }, () => resolve({ host, port, server, cap, takeOver, close }))
  })
