/**
 * What the server's port and certificate need, checked before the database is opened (seconds on
 * a fresh data directory) so that a start that cannot listen says so at once: a port in use, an
 * address this machine does not have, unreadable or mismatched TLS files. A module of its own,
 * light enough to be loaded before the server's (`ServerMain.ts` checks, then opens `EarlyPort`).
 */
import { Effect, Option } from "effect"
import { createServer, type Server } from "node:http"
import { connect } from "node:net"
import type { AppConfigShape } from "../config/AppConfig.js"
import { StartupError } from "../config/StartupError.js"
import { readTlsPair, type TlsFiles } from "./TlsCertificates.js"

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

export const listen = (server: Server, host: string, port: number) =>
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
    Effect.flatMap((listening) => listening ? Effect.fail(listenFailure("EADDRINUSE", config.host, config.port)) : Effect.void)
  )
}

/** The certificate pair at start: unreadable or mismatched files stop it with one line. */
export const checkTls = (config: Pick<AppConfigShape, "tls">) =>
  Option.match(config.tls, {
    onNone: () => Effect.void,
    onSome: (files) => tlsPair(files)
  })

export const tlsPair = (files: TlsFiles) =>
  Effect.suspend(() => {
    const pair = readTlsPair(files)
    return typeof pair === "string" ? Effect.fail(new StartupError({ message: pair })) : Effect.succeed(pair)
  })
