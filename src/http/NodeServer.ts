/**
 * The Node HTTP server `npm start` runs, as an `HttpServer` layer:
 *
 * - the port opens only once the app is attached (`serve`), after storage, migrations and keys are
 *   ready: no connection is ever accepted and left unanswered during start-up;
 * - a port already in use, or an address that cannot be bound, fails the start with one clear line;
 * - when the scope closes (SIGTERM/SIGINT), it stops accepting connections, lets requests in flight
 *   finish for up to SHUTDOWN_GRACE_MS, closes idle keep-alive connections as they become idle,
 *   then closes whatever is left, before storage is closed;
 * - requests Node's parser refuses still get the contract's JSON error body (`ClientErrors`);
 * - the fast lane (`FastLane`) sees each request first and hands it to the app unless it answers it;
 * - with TRUSTED_PROXIES, each request's client address is worked out once, on arrival
 *   (`ClientAddress`), and the app sees it as `request.remoteAddress`;
 * - with TLS_CERT_FILE and TLS_KEY_FILE it speaks HTTPS only, keeps its certificate current
 *   (`TlsCertificates`) and sends `Strict-Transport-Security` with every answer.
 */
import { type HttpApp, HttpServer, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Layer, Option, Runtime } from "effect"
import { createServer, type Server } from "node:http"
import { createServer as createSecureServer } from "node:https"
import { connect } from "node:net"
import type { AppConfigShape } from "../config/AppConfig.js"
import { StartupError } from "../config/StartupError.js"
import { clientAddress, NO_TRUSTED_PROXIES, rememberClientAddress, resolveClientAddress } from "./ClientAddress.js"
import { answerClientErrors } from "./ClientErrors.js"
import { FastLane } from "./FastLane.js"
import { HSTS, readTlsPair, type TlsFiles, watchTlsPair } from "./TlsCertificates.js"

/** `reason`: the error code (EADDRINUSE...), or the message of an error that has none. */
const listenFailure = (reason: string, host: string, port: number) =>
  new StartupError({
    message: reason === "EADDRINUSE"
      ? `port ${port} on ${host} is already in use (set PORT or HOST to another)`
      : reason === "EACCES"
      ? `not allowed to listen on port ${port} on ${host} (set PORT to 1024 or above)`
      : reason === "EADDRNOTAVAIL" || reason === "ENOTFOUND"
      ? `cannot listen on ${host}: no such local address (check HOST)`
      : `cannot listen on ${host}:${port}: ${reason}`
  })

/** Counts requests from arrival until their response is finished or their connection closed. */
const trackInFlight = (server: Server) => {
  let inFlight = 0
  server.on("request", (_request, response) => {
    inFlight++
    response.once("close", () => inFlight--)
  })
  return () => inFlight
}

const drain = (server: Server, inFlight: () => number, graceMs: number) =>
  Effect.promise(async () => {
    server.close()
    const deadline = Date.now() + graceMs
    while (inFlight() > 0 && Date.now() < deadline) {
      server.closeIdleConnections()
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    server.closeAllConnections()
  })

const listen = (server: Server, host: string, port: number) =>
  Effect.async<void, StartupError>((resume) => {
    const onError = (error: NodeJS.ErrnoException) => resume(Effect.fail(listenFailure(error.code ?? error.message, host, port)))
    server.once("error", onError)
    server.listen({ host, port }, () => {
      server.off("error", onError)
      resume(Effect.void)
    })
  })

/** The address to try for a server listening on `host`, when it is this machine's. */
const localProbeAddress = (host: string): string | undefined =>
  host === "" || host === "0.0.0.0" || host === "localhost" || host.startsWith("127.")
    ? host.startsWith("127.") ? host : "127.0.0.1"
    : host === "::" || host === "::1"
    ? "::1"
    : undefined

/**
 * Fails at once when the port cannot be had, so that it is reported before storage is opened
 * (seconds on a fresh embedded database) rather than after. On a local or wildcard address it
 * connects rather than binds: binding, even for a moment, could accept a connection nobody answers
 * on the address clients use. Any other HOST is bound and released at once, which also tells an
 * address this machine does not have.
 */
export const checkPortFree = (config: Pick<AppConfigShape, "host" | "port">) => {
  const address = localProbeAddress(config.host)
  if (address === undefined) {
    return Effect.gen(function*() {
      const probe = createServer()
      yield* listen(probe, config.host, config.port)
      yield* Effect.async<void>((resume) => void probe.close(() => resume(Effect.void)))
    })
  }
  return Effect.async<boolean>((resume) => {
    const socket = connect({ host: address, port: config.port })
    socket.setTimeout(1_000)
    const done = (listening: boolean) => {
      socket.destroy()
      resume(Effect.succeed(listening))
    }
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
    socket.once("timeout", () => done(false))
  }).pipe(
    Effect.flatMap((listening) =>
      listening ? Effect.fail(listenFailure("EADDRINUSE", config.host, config.port)) : Effect.void
    )
  )
}

/** The certificate pair at start: unreadable or mismatched files stop it with one line. */
export const checkTls = (config: Pick<AppConfigShape, "tls">) =>
  Option.match(config.tls, {
    onNone: () => Effect.void,
    onSome: (files) => tlsPair(files)
  })

const tlsPair = (files: TlsFiles) =>
  Effect.suspend(() => {
    const pair = readTlsPair(files)
    return typeof pair === "string" ? Effect.fail(new StartupError({ message: pair })) : Effect.succeed(pair)
  })

/** An HTTPS server on the pair, kept current until the scope closes; plain HTTP without TLS. */
const makeServer = (config: Pick<AppConfigShape, "tls">) =>
  Option.match(config.tls, {
    onNone: () => Effect.succeed(createServer()),
    onSome: (files) =>
      Effect.gen(function*() {
        const server = createSecureServer(yield* tlsPair(files))
        const runFork = Runtime.runFork(yield* Effect.runtime<never>())
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            watchTlsPair(files, {
              replaced: (pair) => {
                server.setSecureContext(pair)
                runFork(Effect.logInfo(`TLS certificate reloaded from ${files.certFile}`))
              },
              refused: (reason) =>
                runFork(Effect.logWarning(`TLS certificate not replaced, still serving the previous one: ${reason}`))
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
  config: Pick<AppConfigShape, "host" | "port" | "shutdownGraceMs" | "trustedProxies" | "tls">
) =>
  Layer.scoped(
    HttpServer.HttpServer,
    Effect.gen(function*() {
      const lane = yield* FastLane
      const server = yield* makeServer(config)
      const secure = Option.isSome(config.tls)
      answerClientErrors(server, secure ? { "strict-transport-security": HSTS } : {})
      const inFlight = trackInFlight(server)
      const proxied = config.trustedProxies !== NO_TRUSTED_PROXIES
      return HttpServer.make({
        address: { _tag: "TcpAddress", hostname: config.host, port: config.port },
        serve: (app, middleware) =>
          Effect.gen(function*() {
            const handler = yield* (middleware === undefined
              ? NodeHttpServer.makeHandler(proxied ? withClientAddress(app) : app)
              : NodeHttpServer.makeHandler(app, proxied ? (inner) => withClientAddress(middleware(inner)) : middleware))
            server.on("request", (request, response) => {
              if (proxied) rememberClientAddress(request, resolveClientAddress(config.trustedProxies, request))
              if (secure) response.setHeader("strict-transport-security", HSTS)
              lane(request, response, () => handler(request, response))
            })
            yield* Effect.acquireRelease(
              // `serve` cannot fail by its type: the StartupError travels as a defect to main.ts.
              listen(server, config.host, config.port).pipe(Effect.orDie),
              () => drain(server, inFlight, config.shutdownGraceMs)
            )
          })
      })
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerContext))
