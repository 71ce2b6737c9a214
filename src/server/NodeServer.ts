/**
 * The Node HTTP server `npm start` runs, as an `HttpServer` layer:
 *
 * - the app is attached (`serve`) once storage, migrations and keys are ready. Over plain HTTP the
 *   port is already open by then (`EarlyPort`: `/healthz` answered, every other request held until
 *   now, then handed to the app); over TLS it opens now. Either way no connection is ever accepted
 *   and left unanswered during start-up;
 * - a port already in use, or an address that cannot be bound, fails the start with one clear line
 *   (`PortChecks`, before the database is opened);
 * - when the scope closes (SIGTERM/SIGINT), it stops accepting connections, lets requests in flight
 *   finish for up to SHUTDOWN_GRACE_MS, closes idle keep-alive connections as they become idle,
 *   then closes whatever is left, before storage is closed, and logs how many requests it drained
 *   (or cut) and how long that took;
 * - requests Node's parser refuses still get the contract's JSON error body (`ClientErrors`);
 * - the fast lane (`FastLane`) sees each request first and hands it to the app unless it answers it;
 * - with TRUSTED_PROXIES, each request's client address is worked out once, on arrival
 *   (`ClientAddress`), and the app sees it as `request.remoteAddress`;
 * - a request must arrive within HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS, and one client address
 *   holds at most MAX_CONNECTIONS_PER_ADDRESS connections (`ConnectionLimits`);
 * - with TLS_CERT_FILE and TLS_KEY_FILE it speaks HTTPS only, keeps its certificate current
 *   (`TlsCertificates`) and sends `Strict-Transport-Security` with every answer.
 */
import { type HttpApp, HttpServer, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Layer, Option, Runtime } from "effect"
import { createServer, type Server, type ServerResponse } from "node:http"
import { createServer as createSecureServer } from "node:https"
import type { AppConfigShape } from "../config/AppConfig.js"
import { clientAddress, NO_TRUSTED_PROXIES, rememberClientAddress, resolveClientAddress } from "./ClientAddress.js"
import { answerClientErrors } from "./ClientErrors.js"
import { type ConnectionCap, capConnections, type ConnectionLimits, serverOptions } from "./ConnectionLimits.js"
import type { EarlyPort } from "./EarlyPort.js"
import { FastLane } from "./FastLane.js"
import { listen, tlsPair } from "./PortChecks.js"
import { HSTS, watchTlsPair } from "./TlsCertificates.js"

/** The requests in flight, and how many have ended so far. */
interface RequestCounts {
  readonly inFlight: () => number
  readonly ended: () => number
}

/**
 * Counts requests from arrival until their response is finished or their connection closed:
 * `arrived` is called by the server's one `request` listener, first.
 */
const trackInFlight = (): RequestCounts & { readonly arrived: (response: ServerResponse) => void } => {
  let inFlight = 0
  let ended = 0
  const closed = () => {
    inFlight--
    ended++
  }
  return {
    inFlight: () => inFlight,
    ended: () => ended,
    arrived: (response) => {
      inFlight++
      response.on("close", closed)
    }
  }
}

/**
 * Stops accepting connections, waits for the requests in flight (up to `graceMs`), closes what is
 * left, and says so in one line: how many requests were drained, how many cut, and how long it took.
 */
const drain = (server: Server, counts: RequestCounts, graceMs: number) =>
  Effect.promise(async () => {
    const started = Date.now()
    const endedBefore = counts.ended()
    server.close()
    const deadline = started + graceMs
    while (counts.inFlight() > 0 && Date.now() < deadline) {
      server.closeIdleConnections()
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const cut = counts.inFlight()
    server.closeAllConnections()
    return { drained: counts.ended() - endedBefore, cut, ms: Date.now() - started }
  }).pipe(
    Effect.flatMap(({ cut, drained, ms }) =>
      Effect.logInfo(
        `shutdown: stopped accepting connections; drained ${drained} request${drained === 1 ? "" : "s"} in ${ms} ms` +
          (cut === 0 ? "" : `; closed ${cut} still unanswered after SHUTDOWN_GRACE_MS (${graceMs} ms)`)
      ).pipe(Effect.annotateLogs({ requests_drained: drained, requests_cut: cut, duration_ms: ms }))
    )
  )

/** An HTTPS server on the pair, kept current until the scope closes; plain HTTP without TLS. */
const makeServer = (config: Pick<AppConfigShape, "tls"> & ConnectionLimits) =>
  Option.match(config.tls, {
    onNone: () => Effect.succeed(createServer(serverOptions(config))),
    onSome: (files) =>
      Effect.gen(function*() {
        const server = createSecureServer({ ...(yield* tlsPair(files)), ...serverOptions(config) })
        const runFork = Runtime.runFork(yield* Effect.runtime<never>())
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            watchTlsPair(files, {
              replaced: (pair) => {
                server.setSecureContext(pair)
                runFork(Effect.logInfo(`TLS certificate reloaded from ${files.certFile}`))
              },
              refused: (reason) => runFork(Effect.logWarning(`TLS certificate not replaced, still serving the previous one: ${reason}`))
            })
          ),
          (stop) => Effect.sync(stop)
        )
        return server as Server
      })
  })

/** The app, seeing the client address `ClientAddress` worked out as `request.remoteAddress`. */
const withClientAddress = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.updateService(
    app,
    HttpServerRequest.HttpServerRequest,
    (request) => request.modify({ remoteAddress: clientAddress(NodeHttpServerRequest.toIncomingMessage(request)) })
  )

export const layer = (
  config:
    & Pick<AppConfigShape, "host" | "port" | "shutdownGraceMs" | "trustedProxies" | "tls">
    & ConnectionLimits,
  /** The port `ServerMain.ts` opened while the storage started, taken over here when it is this address. */
  earlyPort?: EarlyPort
) =>
  Layer.scoped(
    HttpServer.HttpServer,
    Effect.gen(function*() {
      const lane = yield* FastLane
      const secure = Option.isSome(config.tls)
      // Plain HTTP may already listen (`EarlyPort`, opened by ServerMain.ts while the storage started).
      const early = !secure && earlyPort?.host === config.host && earlyPort.port === config.port ? earlyPort : undefined
      const server = early?.server ?? (yield* makeServer(config))
      const cap: ConnectionCap = early?.cap ?? capConnections(server, config.maxConnectionsPerAddress, config.trustedProxies)
      const proxied = config.trustedProxies !== NO_TRUSTED_PROXIES
      const counts = trackInFlight()
      return HttpServer.make({
        address: { _tag: "TcpAddress", hostname: config.host, port: config.port },
        serve: (app, middleware) =>
          Effect.gen(function*() {
            const handler = yield* (middleware === undefined
              ? NodeHttpServer.makeHandler(proxied ? withClientAddress(app) : app)
              : NodeHttpServer.makeHandler(app, proxied ? (inner) => withClientAddress(middleware(inner)) : middleware))
            // Attached in one synchronous step, so an adopted port hands over without a request between.
            const attach = () => {
              answerClientErrors(server, secure ? { "strict-transport-security": HSTS } : {})
              server.on("request", (request, response) => {
                counts.arrived(response)
                if (secure) response.setHeader("strict-transport-security", HSTS)
                if (proxied) {
                  const client = resolveClientAddress(config.trustedProxies, request)
                  rememberClientAddress(request, client)
                  // A trusted proxy's request is counted by the address it forwards (`ConnectionLimits`).
                  const peer = request.socket.remoteAddress
                  if (client !== peer && peer !== undefined && config.trustedProxies.isTrusted(peer)) {
                    if (!cap.admitForwarded(request, response, client)) return
                  }
                }
                lane(request, response, () => handler(request, response))
              })
            }
            yield* Effect.acquireRelease(
              early !== undefined
                ? Effect.sync(() => early.takeOver(attach))
                // `serve` cannot fail by its type: the StartupError travels as a defect to ServerMain.ts.
                : Effect.sync(attach).pipe(Effect.zipRight(listen(server, config.host, config.port)), Effect.orDie),
              () => drain(server, counts, config.shutdownGraceMs)
            )
          })
      })
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerContext))
