/**
 * The catalogue on SQL: PostgreSQL through `@effect/sql-pg`, or embedded PGlite through
 * `PgliteClient`; the statements are the same (`CatalogueStatements`). Each flow's part is made
 * here: the hot reads (`CatalogueLookup`), the other reads (`CatalogueQueries`) and the last use
 * (`LastUse`, written in batches); the writes are `CatalogueWritesSql`'s.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import { laterUse } from "../domain/LastUse.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { CatalogueStore } from "./CredentialRepoCache.js"
import type { CatalogueReads } from "./CatalogueLookup.js"
import type { CatalogueQueriesShape } from "./CatalogueQueries.js"
import { credentialStatements, liveServicesOf, servicesWithCredentials } from "./CatalogueStatements.js"
import { makeWritesSql } from "./CatalogueWritesSql.js"
import { makeLastUseBatch } from "./LastUse.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

const DAY_MS = 86_400_000

const ExpiringRow = Schema.Struct({ within7d: Schema.Number, within30d: Schema.Number })
const LifetimeRow = Schema.Struct({ credential_max_lifetime_days: Schema.NullOr(Schema.Number) })

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const lastUse = yield* makeLastUseBatch(sql)
  /** The stored `last_used_at`, or the later time recorded and not yet written. */
  const recordedOver = (clientId: ClientId, stored: Date | null) => {
    const recorded = lastUse.pendingUse(clientId)
    return recorded === undefined ? stored : laterUse(stored, recorded)
  }
  const {
    clientCredential,
    countRows,
    environmentNames,
    livePage,
    profileCreatedAt,
    profileCredentials,
    profileRows,
    profileServices,
    profileUpstreamOrigins,
    serviceCredentials,
    serviceRoute,
    serviceRows,
    tokenTarget
  } = credentialStatements(sql)
  const expiring = SqlSchema.single({
    Request: Schema.Struct({ now: Schema.DateFromSelf, week: Schema.DateFromSelf, month: Schema.DateFromSelf }),
    Result: ExpiringRow,
    execute: ({ month, now, week }) =>
      sql`SELECT
        count(*) FILTER (WHERE expires_at <= ${week})::int AS "within7d",
        count(*)::int AS "within30d"
        FROM credentials
        WHERE deleted_at IS NULL AND expires_at > ${now} AND expires_at <= ${month}`
  })
  const lifetime = SqlSchema.findOne({
    Request: Schema.String,
    Result: LifetimeRow,
    execute: (profile) => sql`SELECT credential_max_lifetime_days FROM profiles WHERE profile = ${profile}`
  })
  /** The address and client id of a hot read, as its statement takes them. */
  const lookup = (address: ServiceAddress, clientId: Option.Option<ClientId>) => ({
    profile: address.profile,
    environment: address.environment,
    uuid: address.uuid,
    client_id: Option.getOrElse(clientId, () => "")
  })

  const reads: CatalogueReads = {
    findTokenTarget: (address, clientId) =>
      tokenTarget(lookup(address, clientId))
        .pipe(
          parseFailureIsDefect,
          Effect.map((found) =>
            found.pipe(Option.map((row) => ({
              authType: row.auth_type,
              requireDpop: row.require_dpop,
              credential: row.client_id === null || row.secret_hash === null
                ? Option.none()
                : Option.some({
                  clientId: row.client_id,
                  secretHash: row.secret_hash,
                  lastUsedAt: recordedOver(row.client_id, row.last_used_at),
                  expiresAt: row.expires_at
                })
            })))
          ),
          storageOperation
        ),

    findServiceRoute: (address, clientId) =>
      serviceRoute(lookup(address, clientId))
        .pipe(
          parseFailureIsDefect,
          Effect.map((found) =>
            found.pipe(Option.map((row) => ({
              authType: row.auth_type,
              handler: row.handler,
              credentialLive: Option.isSome(clientId) && row.credential_live,
              credentialExpiresAt: row.credential_expires_at === null ? null : row.credential_expires_at.getTime(),
              rateLimit: row.rate_limit,
              requireDpop: row.require_dpop,
              upstreamApproved: row.upstream_approved,
              upstreamOrigins: row.upstream_origins,
              ...(row.revoked.length === 0 ? {} : { revokedTokens: new Set(row.revoked) })
            })))
          ),
          storageOperation
        )
  }

  const queries: CatalogueQueriesShape = {
    ping: storageOperation(Effect.asVoid(sql`SELECT 1`)),

    // The counts are one row always: none would be a bug in the statement, as a row of another shape.
    countCatalogue: countRows(undefined).pipe(
      parseFailureIsDefect,
      Effect.catchTag("NoSuchElementException", Effect.die),
      storageOperation
    ),

    listProfiles: profileRows(undefined).pipe(parseFailureIsDefect, storageOperation),

    // The uses noted so far are written first, outside the read's transaction: the flush waits for
    // batches already on their way, which on the embedded database's one connection could not be
    // written while the transaction held it.
    getProfile: (profile) =>
      Effect.gen(function*() {
        const found = yield* profileCreatedAt(profile)
        if (Option.isNone(found)) return Option.none()
        const environments = yield* environmentNames(profile)
        const services = yield* profileServices(profile)
        const credentials = yield* profileCredentials(profile)
        const lifetime = found.value.credential_max_lifetime_days
        const origins = found.value.upstream_origins
        return Option.some({
          profile,
          created_at: found.value.created_at,
          ...(lifetime === null ? {} : { credential_max_lifetime_days: lifetime }),
          ...(origins === null ? {} : { upstream_origins: origins }),
          environments: environments.map(({ name }) => ({
            name,
            services: servicesWithCredentials(services.filter((s) => s.environment === name), credentials)
          }))
        })
      }).pipe(sql.withTransaction, (read) => Effect.zipRight(lastUse.flush, read), parseFailureIsDefect, storageOperation),

    upstreamOrigins: (profile) =>
      profileUpstreamOrigins(profile).pipe(
        Effect.map(Option.map((row) => row.upstream_origins)),
        parseFailureIsDefect,
        storageOperation
      ),

    getService: (address) =>
      Effect.gen(function*() {
        const services = yield* serviceRows(address)
        if (services.length === 0) return Option.none()
        const credentials = yield* serviceCredentials(address)
        return Option.fromNullable(servicesWithCredentials(services, credentials)[0])
      }).pipe(sql.withTransaction, (read) => Effect.zipRight(lastUse.flush, read), parseFailureIsDefect, storageOperation),

    liveServices: (scope, after, limit) =>
      livePage({
        ...(scope === undefined ? {} : { scope }),
        ...(after === undefined ? {} : { after: { profile: after.profile, environment: after.environment, uuid: after.uuid } }),
        limit
      }).pipe(parseFailureIsDefect, Effect.map(liveServicesOf), storageOperation),

    findClientCredential: (clientId) =>
      clientCredential(clientId).pipe(
        parseFailureIsDefect,
        Effect.map(Option.map((row) => ({
          address: { profile: row.profile, environment: row.environment, uuid: row.service_uuid },
          secretHash: row.secret_hash,
          expiresAt: row.expires_at,
          introspectProfiles: row.introspect_profiles
        }))),
        storageOperation
      ),

    countExpiring: (now) =>
      expiring({ now, week: new Date(now.getTime() + 7 * DAY_MS), month: new Date(now.getTime() + 30 * DAY_MS) }).pipe(
        parseFailureIsDefect,
        Effect.catchTag("NoSuchElementException", Effect.die),
        storageOperation
      ),
    credentialLifetime: (profile: ProfileId) =>
      lifetime(profile).pipe(
        parseFailureIsDefect,
        Effect.map(Option.map((row) => row.credential_max_lifetime_days)),
        storageOperation
      )
  }

  const store: CatalogueStore = {
    reads,
    queries,
    writes: makeWritesSql(sql),
    lastUse: { recordUse: (clientId, now) => Effect.sync(() => lastUse.recordUse(clientId, now)), recordUseSync: lastUse.recordUse }
  }
  return store
})
