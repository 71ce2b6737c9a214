/**
 * `npm start` (`node dist/service-auth.mjs`, this file bundled): reads the configuration, opens the storage it names, migrates
 * it and loads the keys, and only then opens the port (`NodeServer`). SIGTERM or SIGINT drains the
 * requests in flight, closes the database and exits 0. A start that fails prints one line naming
 * what is wrong and exits 1. With an OTLP endpoint configured, spans are exported (`Tracing`).
 */
import { HttpMiddleware } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Logger, Option, Redacted } from "effect"
import { AppConfig, type AppConfigShape } from "./AppConfig.js"
import { layerDomain, layerServe } from "./AppLayer.js"
import { readSigningKeyFile } from "./auth/KeyService.js"
import * as FastLane from "./http/FastLane.js"
import * as NodeServer from "./http/NodeServer.js"
import * as Logging from "./Logging.js"
import { StartupError } from "./StartupError.js"
import * as Storage from "./storage/Storage.js"
import * as Tracing from "./Tracing.js"

const announce = (config: AppConfigShape) =>
  Effect.gen(function*() {
    if (config.adminTokenGenerated) {
      // Printed once, on purpose and whatever LOG_LEVEL says: the operator needs it, and it changes
      // with every start. Set ADMIN_TOKEN to keep it out of the output.
      yield* Effect.sync(() =>
        Logging.printAlways(
          config.logFormat,
          `ADMIN_TOKEN is not set; generated one for this run: ${Redacted.value(config.adminToken)}`
        )
      )
    }
    yield* Effect.logInfo(
      `service-auth listening on http://${config.host}:${config.port} (storage: ${
        config.databaseUrl._tag === "Some" ? "PostgreSQL" : `embedded database in ${config.dataDir}`
      })`
    )
  })

/** Built in this order: storage, the domain on it, the API; the port opens last. */
const serverLayer = (config: AppConfigShape) =>
  layerServe.pipe(
    Layer.provide(NodeServer.layer(config).pipe(Layer.provide(FastLane.layer))),
    Layer.provide(layerDomain),
    Layer.provide(Storage.layerFromConfig),
    Layer.provide(Layer.succeed(AppConfig, config)),
    Layer.tap(() => announce(config))
  )

/**
 * One line for a failed start: a `StartupError` says what and where, as does a typed failure's own
 * description (the database stopped answering during migrations, say); a defect is a bug.
 */
const reportFailure = (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    if (Cause.isInterruptedOnly(cause)) return
    const startup = [...Cause.failures(cause), ...Cause.defects(cause)].find((e) => e instanceof StartupError)
    const failure = Cause.failureOption(cause).pipe(Option.getOrUndefined) as
      | { readonly description?: unknown; readonly message?: unknown }
      | undefined
    const described = typeof failure?.description === "string"
      ? failure.description
      : typeof failure?.message === "string" && failure.message !== ""
      ? failure.message
      : undefined
    console.error(
      startup !== undefined
        ? `service-auth could not start: ${startup.message}`
        : described !== undefined
        ? `service-auth could not start: ${described}`
        : `service-auth stopped on an unexpected failure:\n${Cause.pretty(cause)}`
    )
  })

const program = Effect.gen(function*() {
  const config = yield* AppConfig.fromEnv
  // What needs no database fails before the database is opened (seconds on a fresh data directory).
  yield* NodeServer.checkPortFree(config)
  if (Option.isSome(config.signingKeyFile)) yield* readSigningKeyFile(config.signingKeyFile.value)
  return yield* Layer.launch(serverLayer(config)).pipe(
    // Outside the server: spans are flushed once it has drained and closed its storage.
    Effect.provide(Tracing.layer(config.tracing)),
    Logger.withMinimumLogLevel(config.logLevel),
    Effect.provide(Logging.layer(config.logFormat)),
    Tracing.disabledUnless(config.tracing),
    // The platform's request span records the query string and every header; `requestSpan` is ours.
    HttpMiddleware.withTracerDisabledWhenEffect(() => true)
  )
}).pipe(Effect.tapErrorCause(reportFailure))

NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })

// `runMain` stops listening after the first SIGTERM/SIGINT; a second one (Ctrl-C reaches both npm
// and this process, and npm relays it) must not kill the process in the middle of the drain.
const whileStopping = () => {}
process.on("SIGTERM", whileStopping)
process.on("SIGINT", whileStopping)
