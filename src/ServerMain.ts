/**
 * `npm start` (`node dist/service-auth.mjs`, this file bundled): launching and error reporting. It
 * reads the configuration, checks what needs no database, opens the port for `/healthz` alone
 * (`EarlyPort`: other requests wait), and launches `layerServer` (`AppLayer.ts`), which opens the
 * storage, migrates it and loads the keys, and only then answers them. SIGTERM or
 * SIGINT drains the requests in flight, closes the database and exits 0. A start that fails prints
 * one line naming what is wrong and exits 1. With an OTLP endpoint configured, spans are exported
 * (`Tracing`).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Logger, Option, Redacted } from "effect"
import { loadOrCreateAdminToken } from "./admin/AdminTokenFile.js"
import { ADMIN_TOKEN_ACTOR, weakAdminTokenProblem } from "./admin/AdminTokens.js"
import { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
import { SERVICE_VERSION } from "./config/Version.js"
import { openEarlyPort } from "./server/EarlyPort.js"
import { checkPortFree, checkTls } from "./server/PortChecks.js"
import * as Logging from "./observability/Logging.js"
import { StartupError } from "./config/StartupError.js"
import * as Tracing from "./observability/Tracing.js"
import { PgliteWarmed } from "./storage/PgliteClient.js"
import type { PgliteWarming } from "./storage/PgliteWarmup.js"

/**
 * Without any admin token configured (only possible on the embedded database), the one kept in
 * `DATA_DIR/admin-token`, generated on the first start. The line saying where it is.
 */
const withStoredAdminToken = (config: AppConfigShape) =>
  config.adminTokens.length > 0
    ? Effect.succeed({ config, tokenLine: Option.none<string>(), tokenFile: Option.none<string>() })
    : Effect.map(loadOrCreateAdminToken(config.dataDir), (stored) => ({
      config: { ...config, adminTokens: [{ name: ADMIN_TOKEN_ACTOR, token: stored.token }] },
      tokenLine: Option.some(
        stored.created
          ? `ADMIN_TOKEN is not set: generated an admin token and kept it in ${stored.path} (readable by this user only)`
          : `ADMIN_TOKEN is not set: the admin token is in ${stored.path}`
      ),
      tokenFile: Option.some(stored.path)
    }))

/** Where a browser on this machine reaches the server: a wildcard address is not one to open. */
const browsableOrigin = (config: AppConfigShape) => {
  const host = config.host === "0.0.0.0" || config.host === "::" || config.host === "" ? "localhost" : config.host
  return `${Option.isSome(config.tls) ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${config.port}`
}

/** Which admin token opens the editor: the file the server keeps it in, or the setting that holds it. */
const adminTokenSource = (config: AppConfigShape, tokenFile: Option.Option<string>) =>
  Option.isSome(tokenFile)
    ? `paste the admin token from ${tokenFile.value}`
    : config.adminTokens.some((entry) => entry.name === ADMIN_TOKEN_ACTOR)
    ? "paste the ADMIN_TOKEN you set"
    : "paste an admin token from ADMIN_TOKENS"

/**
 * Without ISSUER, each instance's issuer is its own `http://localhost:<port>`: instances sharing a
 * PostgreSQL database then name different issuers (a token's `iss`, a `resource`, a DPoP proof's `htu`).
 */
const issuerWarning = (config: AppConfigShape): string | undefined =>
  Option.isSome(config.databaseUrl) && !config.issuerConfigured
    ? `ISSUER is not set: this instance's issuer is ${config.issuer}, its own address; instances sharing this ` +
      "PostgreSQL database must share one ISSUER (tokens' iss, resource URLs and DPoP proofs' htu name it): " +
      "set ISSUER to the URL clients use"
    : undefined

const announce = (config: AppConfigShape, tokenLine: Option.Option<string>, tokenFile: Option.Option<string>) =>
  Effect.gen(function*() {
    // A weak ADMIN_TOKEN got this far only on loopback (AppConfig refuses it elsewhere): say so.
    const adminToken = config.adminTokens.find((entry) => entry.name === ADMIN_TOKEN_ACTOR && tokenLine._tag === "None")
    const weak = adminToken && weakAdminTokenProblem(Redacted.value(adminToken.token), config.host)
    if (weak !== undefined) yield* Effect.logWarning(weak.message)
    const issuer = issuerWarning(config)
    if (issuer !== undefined) yield* Effect.logWarning(issuer)
    const origin = browsableOrigin(config)
    yield* Effect.logInfo(
      `service-auth listening on ${Option.isSome(config.tls) ? "https" : "http"}://${config.host}:${config.port} (storage: ${
        config.databaseUrl._tag === "Some" ? "PostgreSQL" : `embedded database in ${config.dataDir}`
      }); editor: ${origin}/admin (${adminTokenSource(config, tokenFile)}); API reference: ${origin}/docs`
    )
  })

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

const program = (warming: PgliteWarming | undefined) =>
  Effect.gen(function*() {
    const configured = yield* AppConfig.fromEnv
    // What needs no database fails before the database is opened (seconds on a fresh data directory).
    yield* checkPortFree(configured)
    yield* checkTls(configured)
    if (Option.isSome(configured.signingKeyFile)) {
      const { readSigningKeyFile } = yield* Effect.promise(() => import("./keys/SigningKeyMaterial.js"))
      yield* readSigningKeyFile(configured.signingKeyFile.value)
    }
    const { config, tokenFile, tokenLine } = yield* withStoredAdminToken(configured)
    // Printed whatever LOG_LEVEL says: the operator needs to know where the token is (never the token).
    if (Option.isSome(tokenLine)) Logging.printAlways(config.logFormat, tokenLine.value)
    // Everything checked that needs no database: /healthz answers from here, other requests wait for
    // the storage (EarlyPort). Over TLS the port opens when the server is ready.
    // A start that fails or is stopped before the server takes the port over answers what it held.
    const earlyPort = Option.isNone(config.tls)
      ? yield* Effect.acquireRelease(
        Effect.promise(() =>
          openEarlyPort(config.host, config.port, {
            headersTimeoutMs: config.headersTimeoutMs,
            requestTimeoutMs: config.requestTimeoutMs,
            maxConnectionsPerAddress: config.maxConnectionsPerAddress,
            trustedProxies: config.trustedProxies
          })
        ),
        (early) => Effect.promise(() => early?.close() ?? Promise.resolve())
      )
      : undefined
    // The server's modules (most of the bundle) are parsed only now, with the port already answering.
    const { layerServer, withoutPlatformRequestSpans } = yield* Effect.promise(() => import("./AppLayer.js"))
    // The server with its storage as configured, announced once it answers every request.
    const server = layerServer({ config, ...(earlyPort === undefined ? {} : { earlyPort }) }).pipe(
      Layer.tap(() => announce(config, tokenLine, tokenFile))
    )
    return yield* Layer.launch(server).pipe(
      Effect.provide(PgliteWarmed.layer(warming)),
      // Outside the server: spans are flushed once it has drained and closed its storage.
      Effect.provide(Tracing.layer(config.tracing)),
      Logger.withMinimumLogLevel(config.logLevel),
      Effect.provide(Logging.layer(config.logFormat)),
      Tracing.disabledUnless(config.tracing),
      withoutPlatformRequestSpans
    )
  }).pipe(
    Effect.tapErrorCause(reportFailure),
    Effect.scoped
  )

/**
 * Runs the server to its end, with what the entry (`start.ts`) warmed of PGlite, if anything. The
 * server is configured by its environment alone; its only arguments print and exit.
 */
export const run = (warming: PgliteWarming | undefined): void => {
  const argument = process.argv[2]
  if (argument === "--version" || argument === "-V") {
    console.log(SERVICE_VERSION)
    return
  }
  if (argument !== undefined) {
    console.error(
      `service-auth: the server takes no argument but --version (it is configured by its environment), not ${JSON.stringify(argument)}`
    )
    process.exitCode = 2
    return
  }
  NodeRuntime.runMain(program(warming), { disableErrorReporting: true, disablePrettyLogger: true })
  // `runMain` stops listening after the first SIGTERM/SIGINT; a second one (Ctrl-C reaches both npm
  // and this process, and npm relays it) must not kill the process in the middle of the drain.
  const whileStopping = () => {}
  process.on("SIGTERM", whileStopping)
  process.on("SIGINT", whileStopping)
}
