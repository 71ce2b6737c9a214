/**
 * The statements of the SQL catalogue (`CatalogueSql`, `CatalogueWritesSql`) that answer rows, each
 * declared with `SqlSchema`: what it is given and the schema of its rows, so that rows are decoded,
 * never cast. Both drivers (node-postgres and PGlite) return `timestamptz` as a `Date` and `jsonb`
 * parsed, as the row schemas say. A row that does not match is a bug: the store makes it a defect
 * (`parseFailureIsDefect`). Below them, what the store answers made from its rows: service documents
 * with their live credentials for the admin API (fields set to their default left out, so that a
 * document reads as it did before the field existed), and the live services of a page for the cache.
 */
import { type SqlClient, SqlSchema } from "@effect/sql"
import { Schema } from "effect"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { answeredHandler, StoredHandler } from "../domain/Handlers.js"
import { AuthType, type CredentialInfo, type ServiceDocument, withPublicKey } from "../domain/Models.js"
import { RateLimit } from "../domain/Policies.js"
import { type LiveService, withIntrospection } from "./CatalogueQueries.js"

export const ServiceDocumentRow = Schema.Struct({
  environment: EnvironmentName,
  uuid: ServiceUuid,
  name: Schema.String,
  auth_type: AuthType,
  handler: StoredHandler,
  rate_limit: Schema.NullOr(RateLimit),
  require_dpop: Schema.Boolean
})
export type ServiceDocumentRow = typeof ServiceDocumentRow.Type

export const CredentialDocumentRow = Schema.Struct({
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  client_id: ClientId,
  /** The credential's verifier: a secret's digest, or a key credential's public key (`KeyCredential`). */
  secret_hash: Schema.String,
  created_at: Schema.DateFromSelf,
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  expires_at: Schema.NullOr(Schema.DateFromSelf),
  introspect_profiles: Schema.NullOr(Schema.Array(ProfileId))
})
export type CredentialDocumentRow = typeof CredentialDocumentRow.Type

const ProfileRow = Schema.Struct({ profile: ProfileId, created_at: Schema.DateFromSelf })
/** A profile's origins (jsonb, parsed by both drivers); null: none. */
const UpstreamOriginsColumn = Schema.NullOr(Schema.Array(Schema.String))

const CreatedAtRow = Schema.Struct({
  created_at: Schema.DateFromSelf,
  credential_max_lifetime_days: Schema.NullOr(Schema.Number),
  upstream_origins: UpstreamOriginsColumn
})
const UpstreamOriginsRow = Schema.Struct({ upstream_origins: UpstreamOriginsColumn })
const NameRow = Schema.Struct({ name: EnvironmentName })
const ClientIdRow = Schema.Struct({ client_id: ClientId })
const CountsRow = Schema.Struct({
  profiles: Schema.Number,
  environments: Schema.Number,
  services: Schema.Number,
  credentials: Schema.Number
})
const RemovedRow = Schema.Struct({ environment: Schema.String, service_uuid: Schema.String, client_id: Schema.String })

const TokenTargetRow = Schema.Struct({
  auth_type: AuthType,
  require_dpop: Schema.Boolean,
  client_id: Schema.NullOr(ClientId),
  secret_hash: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  expires_at: Schema.NullOr(Schema.DateFromSelf)
})

/** The `jti`s a client revoked, as a JSON array (both drivers parse jsonb). */
const RevokedJtis = Schema.Array(Schema.String)

const ServiceRouteRow = Schema.Struct({
  auth_type: AuthType,
  handler: StoredHandler,
  rate_limit: Schema.NullOr(RateLimit),
  require_dpop: Schema.Boolean,
  upstream_approved: Schema.Boolean,
  upstream_origins: UpstreamOriginsColumn,
  credential_live: Schema.Boolean,
  credential_expires_at: Schema.NullOr(Schema.DateFromSelf),
  revoked: RevokedJtis
})

const ClientCredentialRow = Schema.Struct({
  profile: ProfileId,
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  secret_hash: Schema.String,
  expires_at: Schema.NullOr(Schema.DateFromSelf),
  introspect_profiles: Schema.NullOr(Schema.Array(ProfileId))
})

/** A service of a page of the live catalogue, with one of its live credentials (or none). */
export const LiveRow = Schema.Struct({
  profile: ProfileId,
  environment: EnvironmentName,
  uuid: ServiceUuid,
  auth_type: AuthType,
  handler: StoredHandler,
  rate_limit: Schema.NullOr(RateLimit),
  require_dpop: Schema.Boolean,
  upstream_approved: Schema.Boolean,
  upstream_origins: UpstreamOriginsColumn,
  client_id: Schema.NullOr(ClientId),
  secret_hash: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  revoked: Schema.NullOr(RevokedJtis),
  expires_at: Schema.NullOr(Schema.DateFromSelf)
})

/** A client's revoked `jti`s (the index by client id): `[]` when none. */
const revokedOf = (sql: SqlClient.SqlClient, clientId: string) =>
  sql`(SELECT coalesce(jsonb_agg(r.jti), '[]'::jsonb) FROM revoked_tokens r WHERE r.client_id = ${clientId})`

/** What the statements are given: plain text (the branded identifiers were checked on the way in). */
const ProfileKey = Schema.String
const AddressKey = Schema.Struct({ profile: Schema.String, environment: Schema.String, uuid: Schema.String })
/** A hot read's address and the client id asked about ("" when none was given: it matches no credential). */
const CredentialLookup = Schema.Struct({ ...AddressKey.fields, client_id: Schema.String })
const Tombstoning = Schema.Struct({
  now: Schema.DateFromSelf,
  profile: Schema.String,
  environment: Schema.optional(Schema.String),
  uuid: Schema.optional(Schema.String)
})
const LivePage = Schema.Struct({
  scope: Schema.optional(Schema.Array(Schema.String)),
  after: Schema.optional(AddressKey),
  limit: Schema.Number
})

/** The statements, on one connection pool or transaction-aware client. */
export const credentialStatements = (sql: SqlClient.SqlClient) => ({
  tombstone: SqlSchema.findAll({
    Request: Tombstoning,
    Result: RemovedRow,
    execute: ({ environment, now, profile, uuid }) =>
      sql`UPDATE credentials SET deleted_at = ${now}
          WHERE profile = ${profile} AND deleted_at IS NULL
          ${environment === undefined ? sql`` : sql`AND environment = ${environment}`}
          ${uuid === undefined ? sql`` : sql`AND service_uuid = ${uuid}`}
          RETURNING environment, service_uuid, client_id`
  }),
  countRows: SqlSchema.single({
    Request: Schema.Void,
    Result: CountsRow,
    execute: () =>
      sql`SELECT
        (SELECT count(*) FROM profiles)::int AS profiles,
        (SELECT count(*) FROM environments)::int AS environments,
        (SELECT count(*) FROM services)::int AS services,
        (SELECT count(*) FROM credentials WHERE deleted_at IS NULL)::int AS credentials`
  }),
  profileRows: SqlSchema.findAll({
    Request: Schema.Void,
    Result: ProfileRow,
    execute: () => sql`SELECT profile, created_at FROM profiles ORDER BY profile`
  }),
  profileCreatedAt: SqlSchema.findOne({
    Request: ProfileKey,
    Result: CreatedAtRow,
    execute: (profile) => sql`SELECT created_at, credential_max_lifetime_days, upstream_origins FROM profiles WHERE profile = ${profile}`
  }),
  profileUpstreamOrigins: SqlSchema.findOne({
    Request: ProfileKey,
    Result: UpstreamOriginsRow,
    execute: (profile) => sql`SELECT upstream_origins FROM profiles WHERE profile = ${profile}`
  }),
  environmentNames: SqlSchema.findAll({
    Request: ProfileKey,
    Result: NameRow,
    execute: (profile) => sql`SELECT name FROM environments WHERE profile = ${profile} ORDER BY name`
  }),
  profileServices: SqlSchema.findAll({
    Request: ProfileKey,
    Result: ServiceDocumentRow,
    execute: (profile) =>
      sql`SELECT environment, uuid, name, auth_type, handler, rate_limit, require_dpop FROM services WHERE profile = ${profile} ORDER BY position`
  }),
  profileCredentials: SqlSchema.findAll({
    Request: ProfileKey,
    Result: CredentialDocumentRow,
    execute: (profile) =>
      sql`SELECT environment, service_uuid, client_id, secret_hash, created_at, last_used_at, expires_at, introspect_profiles
          FROM credentials
          WHERE profile = ${profile} AND deleted_at IS NULL ORDER BY position`
  }),
  serviceRows: SqlSchema.findAll({
    Request: AddressKey,
    Result: ServiceDocumentRow,
    execute: ({ environment, profile, uuid }) =>
      sql`SELECT environment, uuid, name, auth_type, handler, rate_limit, require_dpop FROM services
          WHERE profile = ${profile} AND environment = ${environment} AND uuid = ${uuid}`
  }),
  serviceCredentials: SqlSchema.findAll({
    Request: AddressKey,
    Result: CredentialDocumentRow,
    execute: ({ environment, profile, uuid }) =>
      sql`SELECT environment, service_uuid, client_id, secret_hash, created_at, last_used_at, expires_at, introspect_profiles
          FROM credentials
          WHERE profile = ${profile} AND environment = ${environment} AND service_uuid = ${uuid} AND deleted_at IS NULL
          ORDER BY position`
  }),
  liveClientIds: SqlSchema.findAll({
    Request: AddressKey,
    Result: ClientIdRow,
    execute: ({ environment, profile, uuid }) =>
      sql`SELECT client_id FROM credentials
          WHERE profile = ${profile} AND environment = ${environment} AND service_uuid = ${uuid}
            AND deleted_at IS NULL`
  }),
  tokenTarget: SqlSchema.findOne({
    Request: CredentialLookup,
    Result: TokenTargetRow,
    execute: ({ client_id, environment, profile, uuid }) =>
      sql`
        SELECT s.auth_type, s.require_dpop, c.client_id, c.secret_hash, c.last_used_at, c.expires_at
        FROM services s
        LEFT JOIN credentials c
          ON c.client_id = ${client_id} AND c.profile = s.profile AND c.environment = s.environment
         AND c.service_uuid = s.uuid AND c.deleted_at IS NULL
        WHERE s.profile = ${profile} AND s.environment = ${environment} AND s.uuid = ${uuid}`
  }),
  clientCredential: SqlSchema.findOne({
    Request: Schema.String,
    Result: ClientCredentialRow,
    execute: (clientId) =>
      sql`SELECT profile, environment, service_uuid, secret_hash, expires_at, introspect_profiles FROM credentials
          WHERE client_id = ${clientId} AND deleted_at IS NULL`
  }),
  serviceRoute: SqlSchema.findOne({
    Request: CredentialLookup,
    Result: ServiceRouteRow,
    execute: ({ client_id, environment, profile, uuid }) =>
      sql`
        SELECT s.auth_type, s.handler, s.rate_limit, s.require_dpop, s.upstream_approved, p.upstream_origins,
          c.client_id IS NOT NULL AS credential_live, c.expires_at AS credential_expires_at,
          ${revokedOf(sql, client_id)} AS revoked
        FROM services s
        JOIN profiles p ON p.profile = s.profile
        LEFT JOIN credentials c
          ON c.client_id = ${client_id} AND c.profile = s.profile AND c.environment = s.environment
         AND c.service_uuid = s.uuid AND c.deleted_at IS NULL
        WHERE s.profile = ${profile} AND s.environment = ${environment} AND s.uuid = ${uuid}`
  }),
  // Services first (a page of the primary key's order), then each one's live credentials by the
  // index of live credentials by service: a lateral lookup per service (`OFFSET 0` keeps it one),
  // whatever the planner believes. Without statistics (PGlite never analyzes; a fresh import) a
  // plain join sorted every live credential for each page: 4 s a page at 100,000 credentials.
  livePage: SqlSchema.findAll({
    Request: LivePage,
    Result: LiveRow,
    execute: ({ after, limit, scope }) =>
      sql`
        WITH page AS (
          SELECT profile, environment, uuid, auth_type, handler, rate_limit, require_dpop, upstream_approved FROM services
          WHERE true
          ${scope === undefined ? sql`` : sql`AND profile = ${scope[0]}`}
          ${scope === undefined || scope.length < 2 ? sql`` : sql`AND environment = ${scope[1]}`}
          ${scope === undefined || scope.length < 3 ? sql`` : sql`AND uuid = ${scope[2]}`}
          ${after === undefined ? sql`` : sql`AND (profile, environment, uuid) > (${after.profile}, ${after.environment}, ${after.uuid})`}
          ORDER BY profile, environment, uuid
          LIMIT ${limit})
        SELECT p.profile, p.environment, p.uuid, p.auth_type, p.handler, p.rate_limit, p.require_dpop, p.upstream_approved,
          (SELECT upstream_origins FROM profiles WHERE profile = p.profile) AS upstream_origins,
          c.client_id, c.secret_hash, c.last_used_at,
          c.expires_at, (SELECT coalesce(jsonb_agg(r.jti), '[]'::jsonb) FROM revoked_tokens r WHERE r.client_id = c.client_id) AS revoked
        FROM page p
        LEFT JOIN LATERAL (
          SELECT client_id, secret_hash, last_used_at, expires_at FROM credentials
          WHERE profile = p.profile AND environment = p.environment AND service_uuid = p.uuid AND deleted_at IS NULL
          OFFSET 0) c ON true
        ORDER BY p.profile, p.environment, p.uuid`
  })
})

const toCredentialInfo = (row: CredentialDocumentRow): CredentialInfo =>
  withIntrospection(
    withPublicKey(
      { client_id: row.client_id, created_at: row.created_at, expires_at: row.expires_at, last_used_at: row.last_used_at },
      row.secret_hash
    ),
    row.introspect_profiles
  )

/** Each service with its credentials (all rows of one profile, or of one service). */
export const servicesWithCredentials = (
  services: ReadonlyArray<ServiceDocumentRow>,
  credentials: ReadonlyArray<CredentialDocumentRow>
): Array<ServiceDocument> =>
  services.map((service) => ({
    uuid: service.uuid,
    name: service.name,
    auth_type: service.auth_type,
    handler: answeredHandler(service.handler),
    ...(service.rate_limit === null ? {} : { rate_limit: service.rate_limit }),
    ...(service.require_dpop ? { require_dpop: true } : {}),
    credentials: credentials
      .filter((c) => c.environment === service.environment && c.service_uuid === service.uuid)
      .map(toCredentialInfo)
  }))

/** Rows in address order, one per live credential (or one with none), grouped by service. */
export const liveServicesOf = (rows: ReadonlyArray<typeof LiveRow.Type>): Array<LiveService> => {
  const services: Array<LiveService & { credentials: Array<LiveService["credentials"][number]> }> = []
  for (const row of rows) {
    let last = services[services.length - 1]
    if (last === undefined || last.profile !== row.profile || last.environment !== row.environment || last.uuid !== row.uuid) {
      last = {
        profile: row.profile,
        environment: row.environment,
        uuid: row.uuid,
        authType: row.auth_type,
        handler: row.handler,
        rateLimit: row.rate_limit,
        requireDpop: row.require_dpop,
        upstreamApproved: row.upstream_approved,
        upstreamOrigins: row.upstream_origins,
        credentials: []
      }
      services.push(last)
    }
    if (row.client_id !== null && row.secret_hash !== null) {
      last.credentials.push({
        clientId: row.client_id,
        secretHash: row.secret_hash,
        lastUsedAt: row.last_used_at,
        revoked: row.revoked ?? [],
        expiresAt: row.expires_at
      })
    }
  }
  return services
}
