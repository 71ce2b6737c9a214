/**
 * The storage a process runs on: PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite
 * persisted in DATA_DIR; migrations are applied before anything else touches the database.
 * `layerMemory` is the in-process store for unit tests and embedding. Each provides the audit trail
 * next to the catalogue that records in it, and the catalogue as narrow services, one per flow's
 * need, over one store behind its read cache: the hot read (`CatalogueLookup`), the writes
 * (`CatalogueWrites`), the other reads (`CatalogueQueries`) and the last use (`LastUse`).
 */
import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Redacted, Schedule, type Scope } from "effect"
import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import { AppConfig } from "../config/AppConfig.js"
import { AdminTokenStore } from "../admin/AdminTokenStore.js"
import { TrustedIssuerStore } from "../federation/TrustedIssuerStore.js"
import * as AuditTrail from "./AuditTrail.js"
import * as CacheCoherence from "../catalogue/CacheCoherence.js"
import { type CacheGuard, type CachedCatalogue, type CatalogueStore, localGuard, withReadCache } from "../catalogue/CredentialRepoCache.js"
import { tracerEnabled } from "../observability/Tracing.js"
import * as CatalogueInMemory from "../catalogue/CatalogueInMemory.js"
import { CatalogueLookup } from "../catalogue/CatalogueLookup.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import * as CatalogueSql from "../catalogue/CatalogueSql.js"
import { CatalogueWrites } from "../catalogue/CatalogueWrites.js"
import { LastUse } from "../catalogue/LastUse.js"
import * as EmbeddedTemplate from "../datadir/EmbeddedTemplate.js"
import { lockDataDir } from "../datadir/DataDirLock.js"
import { FailureCounts } from "../token/FailureCounts.js"
import { SoleWriter } from "../token/SeenJtis.js"
import * as PgliteClient from "./PgliteClient.js"
import { makeDataDirPrivate, tightenDataDir } from "../datadir/PrivateDataDir.js"
import { StartupError } from "../config/StartupError.js"
import { STORAGE_TIMEOUT } from "./StorageErrors.js"
import { ServerKeyStore } from "../keys/ServerKeyStore.js"
import { SigningKeyStore } from "../keys/SigningKeyStore.js"

export type CatalogueServices = CatalogueLookup | CatalogueWrites | CatalogueQueries | LastUse

/**
 * Each operation of the store in a span `CredentialRepo.<operation>` (the names dashboards know),
 * below the cache's own spans (its SQL statements are spans of their own below it). Only where
 * traces are exported.
 */
const storeSpans = ({ lastUse, queries, reads, writes }: CatalogueStore): CatalogueStore => {
  const span = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.withSpan(effect, `CredentialRepo.${operation}`, { captureStackTrace: false })
  return {
    reads: {
      findTokenTarget: (...args) => span("findTokenTarget")(reads.findTokenTarget(...args)),
      findServiceRoute: (...args) => span("findServiceRoute")(reads.findServiceRoute(...args))
    },
    queries: {
      ping: span("ping")(queries.ping),
      countCatalogue: span("countCatalogue")(queries.countCatalogue),
      countExpiring: (...args) => span("countExpiring")(queries.countExpiring(...args)),
      credentialLifetime: (...args) => span("credentialLifetime")(queries.credentialLifetime(...args)),
      upstreamOrigins: (...args) => span("upstreamOrigins")(queries.upstreamOrigins(...args)),
      liveServices: (...args) => span("liveServices")(queries.liveServices(...args)),
      listProfiles: span("listProfiles")(queries.listProfiles),
      getProfile: (...args) => span("getProfile")(queries.getProfile(...args)),
      getService: (...args) => span("getService")(queries.getService(...args)),
      findClientCredential: (...args) => span("findClientCredential")(queries.findClientCredential(...args))
    },
    writes: {
      putProfile: (...args) => span("putProfile")(writes.putProfile(...args)),
      deleteProfile: (...args) => span("deleteProfile")(writes.deleteProfile(...args)),
      putEnvironment: (...args) => span("putEnvironment")(writes.putEnvironment(...args)),
      deleteEnvironment: (...args) => span("deleteEnvironment")(writes.deleteEnvironment(...args)),
      putService: (...args) => span("putService")(writes.putService(...args)),
      deleteService: (...args) => span("deleteService")(writes.deleteService(...args)),
      applyCredentialChanges: (...args) => span("applyCredentialChanges")(writes.applyCredentialChanges(...args)),
      setIntrospectProfiles: (...args) => span("setIntrospectProfiles")(writes.setIntrospectProfiles(...args)),
      revokeToken: (...args) => span("revokeToken")(writes.revokeToken(...args)),
      recordExpiries: (...args) => span("recordExpiries")(writes.recordExpiries(...args))
    },
    lastUse: {
      // The span's name from before the operation was renamed: what dashboards already know.
      recordUse: (...args) => span("touchCredential")(lastUse.recordUse(...args)),
      recordUseSync: lastUse.recordUseSync
    }
  }
}

/** The narrow services over one cached catalogue. */
export const servicesOf = (catalogue: CachedCatalogue): Context.Context<CatalogueServices> =>
  Context.make(CatalogueLookup, catalogue.lookup).pipe(
    Context.add(CatalogueWrites, catalogue.writes),
    Context.add(CatalogueQueries, catalogue.queries),
    Context.add(LastUse, catalogue.lastUse)
  )

/**
 * The store behind its read cache, which loads the live catalogue in the background (misses read
 * the store meanwhile) for as long as the scope lasts; when traces are exported (read as this is
 * made), with a span for each store operation and each cache read.
 */
export const makeCatalogue = <E, R, EG, RG>(
  store: Effect.Effect<CatalogueStore, E, R>,
  guard: Effect.Effect<CacheGuard, EG, RG>
): Effect.Effect<Context.Context<CatalogueServices>, E | EG, R | RG | Scope.Scope> =>
  Effect.gen(function*() {
    const traced = yield* tracerEnabled
    const made = yield* store
    const cached = withReadCache(traced ? storeSpans(made) : made, yield* guard, traced)
    yield* Effect.forkScoped(cached.maintain)
    return servicesOf(cached)
  })

/**
 * Migrations: `migrations/NNNN_name.sql` applied in order with `@effect/sql`'s `Migrator`.
 * `PgMigrator`'s file-system loader only imports `.js`/`.ts` modules, so this loader reads the SQL
 * files itself and runs each one through the simple query protocol (a file may hold several statements).
 */
export const MIGRATIONS_DIRECTORY = join(PACKAGE_ROOT, "migrations")

const MIGRATION_FILE = /^(\d+)_([A-Za-z0-9_-]+)\.sql$/

export const sqlFileLoader = (directory: string): Migrator.Loader =>
  Effect.tryPromise({
    try: () => readdir(directory),
    catch: (cause) => new Migrator.MigrationError({ reason: "import-error", message: `Cannot read ${directory}: ${cause}` })
  }).pipe(
    Effect.map((files) =>
      files
        .flatMap((file) => {
          const match = MIGRATION_FILE.exec(file)
          return match === null ? [] : [[Number(match[1]), match[2]!, file] as const]
        })
        .sort(([a], [b]) => a - b)
        .map(([id, name, file]): Migrator.ResolvedMigration => [
          id,
          name,
          Effect.promise(() => readFile(`${directory}/${file}`, "utf8")).pipe(
            Effect.map((text) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text).unprepared))
          )
        ])
    )
  )

/** Where the migrator records the migrations applied (bookkeeping, never exported). */
export const MIGRATIONS_TABLE = "service_auth_migrations"

const runMigrator = Migrator.make({})

/**
 * Brings the schema up to date. Instances starting together on one database serialise on the
 * migrator's table lock; the one that loses the race to create that table retries.
 */
export const migrate = runMigrator({
  loader: sqlFileLoader(MIGRATIONS_DIRECTORY),
  table: MIGRATIONS_TABLE
}).pipe(
  Effect.retry({ times: 5, schedule: Schedule.spaced("200 millis") }),
  Effect.withSpan("Migrations.migrate")
)

export const migrationsLayer = Layer.effectDiscard(migrate)

/** Repositories over whatever `SqlClient` is provided, after migrating it. */
const sqlRepos = <E, R>(
  repo: Layer.Layer<CatalogueServices, E, R>,
  failureCounts: Layer.Layer<FailureCounts, never, SqlClient.SqlClient>
) =>
  Layer.mergeAll(
    repo,
    AuditTrail.layerSql,
    AdminTokenStore.layerSql,
    TrustedIssuerStore.layerSql,
    ServerKeyStore.layerSql,
    SigningKeyStore.layerSql,
    failureCounts
  ).pipe(
    Layer.provideMerge(migrationsLayer)
  )

/**
 * For PostgreSQL, which other instances write too: the hot reads are cached under a lease kept
 * coherent with the others (docs/cache-coherence.md), failures are counted where all see them.
 */
const layerSqlReposCoherent = (url: Redacted.Redacted<string>) =>
  sqlRepos(
    Layer.scopedContext(makeCatalogue(CatalogueSql.make, CacheCoherence.make(url))),
    FailureCounts.layerSql
  )

/** With the hot reads cached and failures counted locally: only for a database this process alone writes. */
const layerSqlReposCached = sqlRepos(
  Layer.scopedContext(makeCatalogue(CatalogueSql.make, Effect.sync(localGuard))),
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
  Layer.unwrapScoped(
    Effect.gen(function*() {
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
    )
  )

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
export const layerMigrated = <E, R>(client: Layer.Layer<SqlClient.SqlClient, E, R>) => migrationsLayer.pipe(Layer.provideMerge(client))

/**
 * The in-memory repository and its audit trail, behind the same read cache as the embedded
 * database's (one process owns it): tests on memory run production's cached path.
 */
const layerMemoryRepo = Layer.scopedContext(Effect.gen(function*() {
  const { auditTrail, store } = yield* CatalogueInMemory.make
  const services = yield* makeCatalogue(Effect.succeed(store), Effect.sync(localGuard))
  return Context.add(services, AuditTrail.AuditTrail, auditTrail)
}))

export const layerMemory = Layer.mergeAll(
  Layer.merge(AdminTokenStore.layerMemory, TrustedIssuerStore.layerMemory).pipe(Layer.provideMerge(layerMemoryRepo)),
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
