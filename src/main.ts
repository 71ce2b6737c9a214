/**
 * `npm start`: reads the configuration, opens the storage it names, and serves the API.
 */
import { HttpApiBuilder } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel, Redacted } from "effect"
import { createServer } from "node:http"
import { AppConfig } from "./AppConfig.js"
import { DomainLive, HttpApiLive } from "./AppLayer.js"
import * as Storage from "./storage/Storage.js"

const announce = Effect.gen(function*() {
    const config = yield* AppConfig
    if (config.adminTokenGenerated) {
      // Printed once, on purpose: the operator needs it, and it changes with every start.
      yield* Effect.logWarning(
        `ADMIN_TOKEN is not set; generated one for this run: ${Redacted.value(config.adminToken)}`
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
    HttpApiBuilder.serve().pipe(
      Layer.provide(HttpApiLive),
      Layer.provide(DomainLive),
      Layer.provide(Storage.layerFromConfig),
      Layer.provide(NodeHttpServer.layer(createServer, { port: config.port, host: config.host })),
      Layer.tap(() => announce)
    ))
).pipe(Layer.provide(AppConfig.layer))

const logLevel = LogLevel.fromLiteral(
  (["All", "Trace", "Debug", "Info", "Warning", "Error", "Fatal", "None"] as const).find(
    (level) => level.toLowerCase() === (process.env.LOG_LEVEL ?? "info").toLowerCase()
  ) ?? "Info"
)

Layer.launch(ServerLive).pipe(
  Logger.withMinimumLogLevel(logLevel),
  NodeRuntime.runMain
)
