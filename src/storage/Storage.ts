/**
 * The storage a process runs on: PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite
 * persisted in DATA_DIR; migrations are applied before anything else touches the database.
 * `layerMemory` is the in-process store for unit tests and embedding.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, type Redacted } from "effect"
import { AppConfig } from "../AppConfig.js"
import { CredentialRepo } from "./CredentialRepo.js"
import { withReadCache } from "./CredentialRepoCache.js"
import * as CredentialRepoMemory from "./CredentialRepoMemory.js"
import * as CredentialRepoSql from "./CredentialRepoSql.js"
import { lockDataDir } from "./DataDirLock.js"
import * as Migrations from "./Migrations.js"
import * as PgliteClient from "./PgliteClient.js"
import { makeDataDirPrivate } from "./PrivateDataDir.js"
import { STORAGE_TIMEOUT } from "./StorageErrors.js"
import { ServerKeyStore } from "./ServerKeyStore.js"

/** Repositories over whatever `SqlClient` is provided, after migrating it. */
const sqlRepos = <E, R>(repo: Layer.Layer<CredentialRepo, E, R>) =>
  Layer.mergeAll(repo, ServerKeyStore.layerSql).pipe(Layer.provideMerge(Migrations.layer))

export const layerSqlRepos = sqlRepos(CredentialRepoSql.layer)

/** The same, with the hot reads cached: only for a database this process alone writes. */
const layerSqlReposCached = sqlRepos(Layer.effect(CredentialRepo, Effect.map(CredentialRepoSql.make, withReadCache)))

export const layerPostgres = (url: Redacted.Redacted<string>) =>
  layerSqlRepos.pipe(
    Layer.provideMerge(
      PgClient.layer({
        url,
        maxConnections: 10,
        connectTimeout: STORAGE_TIMEOUT,
        idleTimeout: Duration.seconds(30),
        applicationName: "service-auth"
      })
    )
  )

/**
 * Embedded database in `dataDir` (created if missing, private to this user, locked to this process);
 * in memory when undefined. This process is its only writer, so the hot reads are served from a cache.
 */
export const layerEmbedded = (dataDir: string | undefined) =>
  layerSqlReposCached.pipe(
    Layer.provideMerge(
      Layer.unwrapScoped(Effect.gen(function*() {
        if (dataDir !== undefined) {
          yield* makeDataDirPrivate(dataDir)
          yield* lockDataDir(dataDir)
        }
        return PgliteClient.layer({ dataDir })
      }))
    )
  )

export const layerMemory = Layer.mergeAll(CredentialRepoMemory.layer, ServerKeyStore.layerMemory)

export const layerFromConfig = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.databaseUrl, {
      onSome: (url) => layerPostgres(url),
      onNone: () => layerEmbedded(config.dataDir)
    }))
)
