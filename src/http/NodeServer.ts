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
 * - the fast lane (`FastLane`) sees each request first and hands it to the app unless it answers it.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer, type Server } from "node:http"
import { connect } from "node:net"
import type { AppConfigShape } from "../AppConfig.js"
import { StartupError } from "../StartupError.js"
import { answerClientErrors } from "./ClientErrors.js"
import { FastLane } from "./FastLane.js"

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

export const layer = (config: Pick<AppConfigShape, "host" | "port" | "shutdownGraceMs">) =>
  Layer.scoped(
    HttpServer.HttpServer,
    Effect.gen(function*() {
      const lane = yield* FastLane
      const server = createServer()
      answerClientErrors(server)
      const inFlight = trackInFlight(server)
      return HttpServer.make({
        address: { _tag: "TcpAddress", hostname: config.host, port: config.port },
        serve: (app, middleware) =>
          Effect.gen(function*() {
            const handler = yield* (middleware === undefined
              ? NodeHttpServer.makeHandler(app)
              : NodeHttpServer.makeHandler(app, middleware))
            server.on("request", (request, response) => lane(request, response, () => handler(request, response)))
            yield* Effect.acquireRelease(
              // `serve` cannot fail by its type: the StartupError travels as a defect to main.ts.
              listen(server, config.host, config.port).pipe(Effect.orDie),
              () => drain(server, inFlight, config.shutdownGraceMs)
            )
          })
      })
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerContext))
