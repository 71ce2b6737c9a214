/**
 * The storage a process runs on: PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite
 * persisted in DATA_DIR; migrations are applied before anything else touches the database.
 * `layerMemory` is the in-process store for unit tests and embedding. Each provides the audit trail
 * next to the repository that records in it.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { AdminTokenStore } from "./AdminTokenStore.js"
import * as AuditTrail from "./AuditTrail.js"
import * as CatalogueServices from "./CatalogueServices.js"
import * as CacheCoherence from "../catalogue/CacheCoherence.js"
import { localGuard } from "../catalogue/CredentialRepoCache.js"
import * as CredentialRepoMemory from "./CredentialRepoMemory.js"
import * as CredentialRepoSql from "./CredentialRepoSql.js"
import * as EmbeddedTemplate from "../datadir/EmbeddedTemplate.js"
import { lockDataDir } from "../datadir/DataDirLock.js"
import { FailureCounts } from "./FailureCounts.js"
import { SoleWriter } from "./SeenJtis.js"
import * as Migrations from "./Migrations.js"
import * as PgliteClient from "./PgliteClient.js"
import { makeDataDirPrivate, tightenDataDir } from "../datadir/PrivateDataDir.js"
import { StartupError } from "../config/StartupError.js"
import { STORAGE_TIMEOUT } from "./StorageErrors.js"
import { ServerKeyStore } from "../keys/ServerKeyStore.js"
import { SigningKeyStore } from "../keys/SigningKeyStore.js"

/** Repositories over whatever `SqlClient` is provided, after migrating it. */
const sqlRepos = <E, R>(repo: Layer.Layer<CatalogueServices.CatalogueServices, E, R>, failureCounts: Layer.Layer<FailureCounts, never, SqlClient.SqlClient>) =>
  Layer.mergeAll(
    repo,
    AuditTrail.layerSql,
    AdminTokenStore.layerSql,
    ServerKeyStore.layerSql,
    SigningKeyStore.layerSql,
    failureCounts
  ).pipe(
    Layer.provideMerge(Migrations.layer)
  )

/**
 * For PostgreSQL, which other instances write too: the hot reads are cached under a lease kept
 * coherent with the others (docs/cache-coherence.md), failures are counted where all see them.
 */
const layerSqlReposCoherent = (url: Redacted.Redacted<string>) =>
  sqlRepos(
    Layer.scopedContext(CatalogueServices.make(CredentialRepoSql.make, CacheCoherence.make(url))),
    FailureCounts.layerSql
  )

/** With the hot reads cached and failures counted locally: only for a database this process alone writes. */
const layerSqlReposCached = sqlRepos(
  Layer.scopedContext(CatalogueServices.make(CredentialRepoSql.make, Effect.sync(localGuard))),
  FailureCounts.layerLocal
)

/** Where a PostgreSQL URL points, for messages: never its password. */
export const describeDatabase = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.hostname || "localhost"}:${parsed.port || "5432"}${parsed.pathname || "/"}`
  } catch {
    return "DATABASE_URL (not a valid URL)"
  }
}

/** Why PostgreSQL refused or could not be reached, from the driver's error code. */
const connectionProblem = (cause: unknown): string => {
  const error = cause as { code?: unknown; message?: unknown; errors?: ReadonlyArray<{ code?: unknown }> } | undefined
  const code = typeof error?.code === "string" ? error.code : error?.errors?.find((e) => typeof e.code === "string")?.code
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused (is PostgreSQL running and listening there?)"
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host not found"
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "host unreachable"
    case "28P01":
    case "28000":
      return "authentication failed (check the user and password in DATABASE_URL)"
    case "3D000":
      return "the database does not exist (create it first)"
    case "53300":
      return "too many connections"
    case "57P03":
      return "the database is starting up or shutting down"
  }
  const message = typeof error?.message === "string" ? error.message : ""
  if (/timeout|timed out/i.test(message)) return `no answer within ${Duration.toMillis(STORAGE_TIMEOUT) / 1000} s`
  return typeof code === "string" ? `error ${code}` : "the connection failed"
}

/** A connection pool to PostgreSQL, failing with one line that says where and why. */
export const layerPostgresClient = (url: Redacted.Redacted<string>) =>
  PgClient.layer({
    url,
    maxConnections: 10,
    connectTimeout: STORAGE_TIMEOUT,
    idleTimeout: Duration.seconds(30),
    applicationName: "service-auth"
  }).pipe(
    Layer.mapError((error) =>
      new StartupError({
        message: `cannot connect to PostgreSQL at ${describeDatabase(Redacted.value(url))}: ${connectionProblem(error.cause)}`
      })
    )
  )

export const layerPostgres = (url: Redacted.Redacted<string>) =>
  layerSqlReposCoherent(url).pipe(Layer.provideMerge(layerPostgresClient(url)))

/**
 * The embedded database's client: `dataDir` created if missing, private to this user, locked to this
 * process for the scope's lifetime; in memory when undefined.
 */
export const layerEmbeddedClient = (dataDir: string | undefined) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    if (dataDir !== undefined) {
      yield* makeDataDirPrivate(dataDir)
      yield* lockDataDir(dataDir)
      if (!PgliteClient.isInitialized(dataDir)) {
        // The build's template when there is one (milliseconds), initdb otherwise (seconds).
        const copied = yield* EmbeddedTemplate.copyInto(dataDir).pipe(
          Effect.mapError((error) =>
            new StartupError({ message: `cannot create the embedded database in DATA_DIR ${dataDir}: ${error.message}` })
          )
        )
        if (!copied) {
          yield* PgliteClient.initializeApart(dataDir).pipe(
            Effect.mapError((error) =>
              new StartupError({ message: `cannot create the embedded database in DATA_DIR ${dataDir}: ${error.cause}` })
            )
          )
        }
        yield* tightenDataDir(dataDir)
      }
    }
    return PgliteClient.layer({ dataDir }).pipe(
      Layer.mapError((error) =>
        new StartupError({
          message: `cannot open the embedded database in DATA_DIR ${dataDir}: ${
            error.cause instanceof Error ? error.cause.message : String(error.cause)
          }`
        })
      )
    )
  }).pipe(
    Effect.mapError((error) =>
      error instanceof StartupError ? error : new StartupError({ message: `DATA_DIR ${dataDir}: ${error.message}` })
    )
  ))

/**
 * Embedded database in `dataDir` (see `layerEmbeddedClient`). This process is its only writer, so
 * the hot reads are served from a cache, and seen JWT ids are checked in memory (`SoleWriter`).
 */
export const layerEmbedded = (dataDir: string | undefined) =>
  layerSqlReposCached.pipe(Layer.provideMerge(Layer.merge(layerEmbeddedClient(dataDir), SoleWriter.layer)))

/**
 * Only the migrated `SqlClient`, no repositories, caches or leases: for the operator's commands that
 * work on the database itself (`export`, `import`), on the same clients and migrations as the server.
 */
export const layerMigrated = <E, R>(client: Layer.Layer<SqlClient.SqlClient, E, R>) =>
  Migrations.layer.pipe(Layer.provideMerge(client))

/**
 * The in-memory repository and its audit trail, behind the same read cache as the embedded
 * database's (one process owns it): tests on memory run production's cached path.
 */
const layerMemoryRepo = Layer.scopedContext(Effect.gen(function*() {
  const { auditTrail, repo } = yield* CredentialRepoMemory.makeWithAuditTrail
  const services = yield* CatalogueServices.make(Effect.succeed(repo), Effect.sync(localGuard))
  return Context.add(services, AuditTrail.AuditTrail, auditTrail)
}))

export const layerMemory = Layer.mergeAll(
  AdminTokenStore.layerMemory.pipe(Layer.provideMerge(layerMemoryRepo)),
  ServerKeyStore.layerMemory,
  SigningKeyStore.layerMemory,
  FailureCounts.layerLocal
)

export const layerFromConfig = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.databaseUrl, {
      onSome: (url) => layerPostgres(url),
      onNone: () => layerEmbedded(config.dataDir)
    }))
)
