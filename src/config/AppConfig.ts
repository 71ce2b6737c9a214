/**
 * Configuration from the environment (docs/contract.md §5). Everything has a default, so a bare
 * `npm start` runs on the embedded database in `./data`.
 */
import { Config, ConfigError, Context, Effect, Either, Layer, LogLevel, Option, Redacted } from "effect"
import { type AdminTokenEntry, parseAdminTokens, weakAdminTokenProblem } from "../admin/AdminTokens.js"
import { NO_TRUSTED_PROXIES, parseTrustedProxies, type TrustedProxies } from "../server/ClientAddress.js"
import { DEFAULT_CONNECTION_LIMITS } from "../server/ConnectionLimits.js"
import type { TlsFiles } from "../server/TlsCertificates.js"
import { fromConfigError } from "./StartupError.js"
import { parseAllowedOrigins } from "../domain/UpstreamPolicy.js"
import { settingsFromEnv as tracingFromEnv, type TracingSettings } from "../observability/TracingSettings.js"

/** LOG_LEVEL values, case-insensitive. */
const LOG_LEVELS = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"] as const
const logLevelOf = (name: typeof LOG_LEVELS[number]): LogLevel.LogLevel =>
  LogLevel.fromLiteral(`${name[0]!.toUpperCase()}${name.slice(1)}` as LogLevel.Literal)

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  /**
   * Every admin token with its actor (ADMIN_TOKEN as `admin`, then ADMIN_TOKENS). Empty only on
   * the embedded database, until `ServerMain.ts` adds the one kept in `DATA_DIR/admin-token`.
   */
  readonly adminTokens: ReadonlyArray<AdminTokenEntry>
  /** Public base URL: the `iss` of every token and the base of the discovery document. */
  readonly issuer: string
  /**
   * Whether ISSUER was set. Only then is a token's `iss` required to equal it: the default issuer
   * names this instance's port, and instances sharing a database must accept each other's tokens.
   */
  readonly issuerConfigured: boolean
  readonly signingKeyFile: Option.Option<string>
  /** Seconds a new signing key is published before it signs (KEY_PUBLISH_DELAY_S, default 300). */
  readonly keyPublishDelaySeconds: number
  /** Rotate the signing key automatically when the active one is older than this (KEY_ROTATION_DAYS). */
  readonly keyRotationDays: Option.Option<number>
  /** AES-256-GCM key sealing private keys and the digest key at rest (KEY_ENCRYPTION_KEY), 32 bytes. */
  readonly keyEncryptionKey: Option.Option<Redacted.Redacted<Buffer>>
  /** The key being rotated away from (KEY_ENCRYPTION_KEY_PREVIOUS): opens, never seals. */
  readonly keyEncryptionKeyPrevious: Option.Option<Redacted.Redacted<Buffer>>
  readonly maxBodyBytes: number
  readonly upstreamTimeoutMs: number
  /** Calls in flight to one proxy service's upstream, on this instance, before more are refused (503). */
  readonly upstreamMaxConcurrency: number
  /** UPSTREAM_ALLOWED_ORIGINS: origins every profile's proxy services may target (`UpstreamPolicy`), normalised. */
  readonly upstreamAllowedOrigins: ReadonlyArray<string>
  /** Failed client authentications per client id and remote address per minute before 429. */
  readonly authFailureLimit: number
  /** How long SIGTERM waits for requests in flight before closing their connections. */
  readonly shutdownGraceMs: number
  /** HEADERS_TIMEOUT_MS: a request's line and headers must arrive within it (`ConnectionLimits`). */
  readonly headersTimeoutMs: number
  /** REQUEST_TIMEOUT_MS: the whole request, headers and body, must arrive within it. */
  readonly requestTimeoutMs: number
  /** MAX_CONNECTIONS_PER_ADDRESS: connections (or, behind a trusted proxy, requests) open per client address. */
  readonly maxConnectionsPerAddress: number
  readonly logLevel: LogLevel.LogLevel
  /** `text` (the default, for people) or `json` (one object per line, for log pipelines). */
  readonly logFormat: "text" | "json"
  /** When set, `GET /metrics` requires it as a Bearer token. */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /** Where spans are exported (OTEL_EXPORTER_OTLP_*); none: tracing is off. */
  readonly tracing: Option.Option<TracingSettings>
  /** TRUSTED_PROXIES: peers whose forwarding headers name the client address (`ClientAddress`). */
  readonly trustedProxies: TrustedProxies
  /** TLS_CERT_FILE and TLS_KEY_FILE: HTTPS on PORT when set (`TlsCertificates`). */
  readonly tls: Option.Option<TlsFiles>
}

/** TRUSTED_PROXIES, parsed; a malformed entry stops the start. */
const trustedProxiesFromEnv = Effect.gen(function*() {
  const parsed = parseTrustedProxies(Option.getOrElse(yield* Config.option(Config.string("TRUSTED_PROXIES")), () => ""))
  return "error" in parsed ? yield* Effect.fail(ConfigError.InvalidData([], parsed.error)) : parsed.proxies
})

/** UPSTREAM_ALLOWED_ORIGINS, parsed; a malformed entry stops the start. */
const upstreamAllowedOriginsFromEnv = Effect.gen(function*() {
  const parsed = parseAllowedOrigins(Option.getOrElse(yield* Config.option(Config.string("UPSTREAM_ALLOWED_ORIGINS")), () => ""))
  return Either.isLeft(parsed) ? yield* Effect.fail(ConfigError.InvalidData([], parsed.left)) : parsed.right
})

/** TLS_CERT_FILE and TLS_KEY_FILE: both or neither (empty is unset). */
const tlsFromEnv = Effect.gen(function*() {
  const read = (name: string) => Effect.map(Config.option(Config.string(name)), Option.filter((path) => path.trim() !== ""))
  const certFile = yield* read("TLS_CERT_FILE")
  const keyFile = yield* read("TLS_KEY_FILE")
  if (Option.isSome(certFile) && Option.isSome(keyFile)) {
    return Option.some<TlsFiles>({ certFile: certFile.value, keyFile: keyFile.value })
  }
  if (Option.isSome(certFile) || Option.isSome(keyFile)) {
    return yield* Effect.fail(ConfigError.InvalidData(
      [],
      "TLS_CERT_FILE and TLS_KEY_FILE must be set together (the certificate and its private key, PEM)"
    ))
  }
  return Option.none<TlsFiles>()
})

/**
 * ADMIN_TOKEN and ADMIN_TOKENS, checked. With PostgreSQL one is required: instances sharing a
 * database cannot each generate their own.
 */
const adminTokensFromEnv = (postgres: boolean, host: string) =>
  Effect.gen(function*() {
    const read = (name: string) => Effect.map(Config.option(Config.redacted(name)), Option.map(Redacted.value))
    const adminToken = Option.getOrUndefined(yield* read("ADMIN_TOKEN"))
    const parsed = parseAdminTokens(adminToken, Option.getOrUndefined(yield* read("ADMIN_TOKENS")))
    if (Either.isLeft(parsed)) return yield* Effect.fail(ConfigError.InvalidData([], parsed.left))
    const weak = weakAdminTokenProblem(adminToken ?? "", host)
    if (weak?.refused === true) return yield* Effect.fail(ConfigError.InvalidData([], weak.message))
    if (parsed.right.length === 0 && postgres) {
      return yield* Effect.fail(ConfigError.InvalidData(
        [],
        "ADMIN_TOKEN or ADMIN_TOKENS is required with DATABASE_URL (PostgreSQL): the server generates an admin token only for the embedded database"
      ))
    }
    return parsed.right
  })

/** 32 bytes as 64 hex digits or base64 (either alphabet, padding optional); undefined otherwise. */
export const parseEncryptionKey = (text: string): Buffer | undefined => {
  const trimmed = text.trim()
  const bytes = /^[0-9A-Fa-f]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)
    ? Buffer.from(trimmed.replace(/\+/g, "-").replace(/\//g, "_").replace(/=$/, ""), "base64url")
    : undefined
  return bytes?.length === 32 ? bytes : undefined
}

/** An encryption key setting: unset or empty is none; anything but 32 bytes stops the start (never echoed). */
const encryptionKey = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.map(Option.filter((value) => Redacted.value(value).trim() !== "")),
    Config.validate({
      message: `${name} must be 32 bytes, written as 64 hex digits or in base64 (e.g. openssl rand -base64 32)`,
      validation: Option.match({ onNone: () => true, onSome: (value) => parseEncryptionKey(Redacted.value(value)) !== undefined })
    }),
    Config.map(Option.map((value) => Redacted.make(parseEncryptionKey(Redacted.value(value))!)))
  )

const databaseUrlProblem = (scheme: string) =>
  `DATABASE_URL names a ${scheme}: database; it must be a PostgreSQL URL, postgres://user@host:port/database ` +
  "(or postgresql://), or be unset for the embedded database"

/**
 * The scheme of a DATABASE_URL that is not PostgreSQL's (`mysql`, `sqlite`, `http`), so a start with
 * another database's URL says so instead of trying to reach it as PostgreSQL. Undefined: fine (empty,
 * `postgres:`/`postgresql:`, or no scheme at all, e.g. a bare socket directory, which PostgreSQL's
 * client reads itself).
 */
export const databaseUrlScheme = (url: string): string | undefined => {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase()
  return scheme === undefined || scheme === "postgres" || scheme === "postgresql" ? undefined : scheme
}

export class AppConfig extends Context.Tag("service-auth/AppConfig")<AppConfig, AppConfigShape>() {
  static readonly fromEnv = Effect.gen(function*() {
    const port = yield* Config.port("PORT").pipe(Config.withDefault(3000))
    const host = yield* Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))
    const databaseUrl = Option.filter(
      yield* Config.option(
        Config.redacted("DATABASE_URL").pipe(
          Config.mapOrFail((url) => {
            const scheme = databaseUrlScheme(Redacted.value(url))
            return scheme === undefined
              ? Either.right(url)
              : Either.left(ConfigError.InvalidData([], databaseUrlProblem(scheme)))
          })
        )
      ),
      (url) => Redacted.value(url).length > 0
    )
    const adminTokens = yield* adminTokensFromEnv(Option.isSome(databaseUrl), host)
    const configuredIssuer = Option.filter(yield* Config.option(Config.string("ISSUER")), (url) => url.length > 0)
    const tls = yield* tlsFromEnv
    const issuer = Option.getOrElse(configuredIssuer, () => `${Option.isSome(tls) ? "https" : "http"}://localhost:${port}`)
    const config = AppConfig.of({
      port,
      host,
      databaseUrl,
      dataDir: yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
      adminTokens,
      issuer: issuer.replace(/\/+$/, ""),
      issuerConfigured: Option.isSome(configuredIssuer),
      signingKeyFile: Option.filter(yield* Config.option(Config.string("SIGNING_KEY_FILE")), (f) => f.length > 0),
      keyPublishDelaySeconds: yield* Config.integer("KEY_PUBLISH_DELAY_S").pipe(
        Config.validate({ message: "KEY_PUBLISH_DELAY_S must be a non-negative integer", validation: (n) => n >= 0 }),
        Config.withDefault(300)
      ),
      keyRotationDays: yield* Config.option(
        Config.number("KEY_ROTATION_DAYS").pipe(
          Config.validate({
            message: "KEY_ROTATION_DAYS must be a positive number of days",
            validation: (n) => Number.isFinite(n) && n > 0
          })
        )
      ),
      keyEncryptionKey: yield* encryptionKey("KEY_ENCRYPTION_KEY"),
      keyEncryptionKeyPrevious: yield* encryptionKey("KEY_ENCRYPTION_KEY_PREVIOUS"),
      maxBodyBytes: yield* Config.integer("MAX_BODY_BYTES").pipe(
        Config.validate({ message: "MAX_BODY_BYTES must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(1024 * 1024)
      ),
      upstreamTimeoutMs: yield* Config.integer("UPSTREAM_TIMEOUT_MS").pipe(
        Config.validate({ message: "UPSTREAM_TIMEOUT_MS must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(10_000)
      ),
      upstreamMaxConcurrency: yield* Config.integer("UPSTREAM_MAX_CONCURRENCY").pipe(
        Config.validate({ message: "UPSTREAM_MAX_CONCURRENCY must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(256)
      ),
      upstreamAllowedOrigins: yield* upstreamAllowedOriginsFromEnv,
      authFailureLimit: yield* Config.integer("AUTH_FAILURE_LIMIT").pipe(
        Config.validate({ message: "AUTH_FAILURE_LIMIT must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(20)
      ),
      shutdownGraceMs: yield* Config.integer("SHUTDOWN_GRACE_MS").pipe(
        Config.validate({ message: "SHUTDOWN_GRACE_MS must be a non-negative integer", validation: (n) => n >= 0 }),
        Config.withDefault(10_000)
      ),
      headersTimeoutMs: yield* Config.integer("HEADERS_TIMEOUT_MS").pipe(
        Config.validate({ message: "HEADERS_TIMEOUT_MS must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(DEFAULT_CONNECTION_LIMITS.headersTimeoutMs)
      ),
      requestTimeoutMs: yield* Config.integer("REQUEST_TIMEOUT_MS").pipe(
        Config.validate({ message: "REQUEST_TIMEOUT_MS must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(DEFAULT_CONNECTION_LIMITS.requestTimeoutMs)
      ),
      maxConnectionsPerAddress: yield* Config.integer("MAX_CONNECTIONS_PER_ADDRESS").pipe(
        Config.validate({ message: "MAX_CONNECTIONS_PER_ADDRESS must be a positive integer", validation: (n) => n > 0 }),
        Config.withDefault(DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress)
      ),
      logLevel: yield* Config.string("LOG_LEVEL").pipe(
        Config.map((value) => value.toLowerCase()),
        Config.validate({
          message: `LOG_LEVEL must be one of ${LOG_LEVELS.filter((l) => l !== "all" && l !== "fatal").join(", ")}`,
          validation: (value: string) => value === "" || LOG_LEVELS.includes(value as never)
        }),
        Config.map((value) => logLevelOf(value === "" ? "info" : value as typeof LOG_LEVELS[number])),
        Config.withDefault(LogLevel.Info)
      ),
      logFormat: yield* Config.string("LOG_FORMAT").pipe(
        Config.map((value) => value.toLowerCase()),
        Config.validate({
          message: "LOG_FORMAT must be text or json",
          validation: (value: string) => value === "" || value === "text" || value === "json"
        }),
        Config.map((value): "text" | "json" => (value === "json" ? "json" : "text")),
        Config.withDefault<"text" | "json">("text")
      ),
      metricsToken: Option.filter(
        yield* Config.option(Config.redacted("METRICS_TOKEN")),
        (token) => Redacted.value(token).length > 0
      ),
      tracing: yield* tracingFromEnv,
      trustedProxies: yield* trustedProxiesFromEnv,
      tls
    })
    if (config.headersTimeoutMs > config.requestTimeoutMs) {
      return yield* Effect.fail(ConfigError.InvalidData(
        [],
        `HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${config.requestTimeoutMs}): the headers are part of the request`
      ))
    }
    if (Option.isSome(config.keyRotationDays) && Option.isSome(config.signingKeyFile)) {
      return yield* Effect.fail(ConfigError.InvalidData(
        [],
        "KEY_ROTATION_DAYS cannot be used with SIGNING_KEY_FILE (the file's key is rotated by replacing the file)"
      ))
    }
    return config
  }).pipe(Effect.mapError(fromConfigError))

  static readonly layer = Layer.effect(AppConfig, AppConfig.fromEnv)

  /** Defaults for tests; override any field. */
  static readonly layerTest = (overrides: Partial<AppConfigShape> = {}) =>
    Layer.succeed(
      AppConfig,
      AppConfig.of({
        port: 0,
        host: "127.0.0.1",
        databaseUrl: Option.none(),
        dataDir: "./data",
        adminTokens: [{ name: "admin", token: Redacted.make("test-admin-token") }],
        issuer: "http://issuer.test",
        issuerConfigured: true,
        signingKeyFile: Option.none(),
        keyPublishDelaySeconds: 300,
        keyRotationDays: Option.none(),
        keyEncryptionKey: Option.none(),
        keyEncryptionKeyPrevious: Option.none(),
        maxBodyBytes: 1024 * 1024,
        upstreamTimeoutMs: 10_000,
        upstreamMaxConcurrency: 256,
        upstreamAllowedOrigins: [],
        authFailureLimit: 20,
        shutdownGraceMs: 10_000,
        ...DEFAULT_CONNECTION_LIMITS,
        logLevel: LogLevel.Info,
        logFormat: "text",
        metricsToken: Option.none(),
        tracing: Option.none(),
        trustedProxies: NO_TRUSTED_PROXIES,
        tls: Option.none(),
        ...overrides
      })
    )
}
