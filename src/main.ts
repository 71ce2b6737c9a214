/**
 * `npm start`: reads the configuration, opens the storage it names, and serves the API until
 * SIGTERM/SIGINT, then drains requests in flight, closes the database and exits 0.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Exit, Fiber, Layer, Logger, LogLevel, Redacted } from "effect"
import { createServer } from "node:http"
import { AppConfig } from "./AppConfig.js"
import { DomainLive, ServeApi } from "./AppLayer.js"
import { answerClientErrors } from "./http/ClientErrors.js"
import { drain, trackInFlight } from "./http/GracefulShutdown.js"
import * as Storage from "./storage/Storage.js"

const server = createServer()
const inFlight = trackInFlight(server)
answerClientErrors(server)
let shutdownGraceMs = 10_000

const announce = Effect.gen(function*() {
  const config = yield* AppConfig
  shutdownGraceMs = config.shutdownGraceMs
  if (config.adminTokenGenerated) {
    // Printed once, on purpose and whatever LOG_LEVEL says: the operator needs it, and it changes
    // with every start. Set ADMIN_TOKEN to keep it out of the output.
    yield* Effect.sync(() =>
      console.log(`ADMIN_TOKEN is not set; generated one for this run: ${Redacted.value(config.adminToken)}`)
    )
  }
  yield* Effect.logInfo(
    `service-auth listening on http://${config.host}:${config.port} (storage: ${
      config.databaseUrl._tag === "Some" ? "PostgreSQL" : `embedded database in ${config.dataDir}`
    })`
  )
})

const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    ServeApi.pipe(
      Layer.provide(DomainLive),
      Layer.provide(Storage.layerFromConfig),
      Layer.provide(NodeHttpServer.layer(() => server, { port: config.port, host: config.host })),
      Layer.tap(() => announce)
    ))
).pipe(Layer.provide(AppConfig.layer))

const logLevel = LogLevel.fromLiteral(
  (["All", "Trace", "Debug", "Info", "Warning", "Error", "Fatal", "None"] as const).find(
    (level) => level.toLowerCase() === (process.env.LOG_LEVEL ?? "info").toLowerCase()
  ) ?? "Info"
)

const main = Effect.runFork(Layer.launch(ServerLive).pipe(Logger.withMinimumLogLevel(logLevel)))

main.addObserver((exit) => {
  if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
    // A failure at start (bad configuration, locked data directory, unreachable database) is
    // reported in one line; anything else is a bug and gets the full cause.
    const failure = Cause.failureOption(exit.cause)
    console.error(
      failure._tag === "Some"
        ? `service-auth could not start: ${failure.value instanceof Error ? failure.value.message : String(failure.value)}`
        : Cause.pretty(exit.cause)
    )
    process.exit(1)
  }
  process.exit(0)
})

let stopping = false
const stop = () => {
  if (stopping) return
  stopping = true
  void drain(server, inFlight, shutdownGraceMs).then(() => Effect.runFork(Fiber.interrupt(main)))
}
// `on`, not `once`: a signal sent to the process group can arrive twice (directly and relayed by
// tsx); a second one with no listener left would kill the process mid-drain.
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
