/**
 * What the SQL repository (`CredentialRepoSql`) answers, made from its rows: service documents with
 * their live credentials for the admin API, and the live services a page of the catalogue holds for
 * the cache. Fields set to their default (no rate limit, Bearer tokens accepted) are left out of a
 * document, so that it reads as it did before the field existed.
 */
import { answeredHandler } from "../domain/Handlers.js"
import { type CredentialInfo, type ServiceDocument, withPublicKey } from "../domain/Models.js"
import type { LiveService } from "./CredentialRepo.js"
import { withIntrospection } from "./CredentialIntrospection.js"
import type { CredentialRow, LiveRow, ServiceRow } from "./CredentialRepoStatements.js"

const toCredentialInfo = (row: CredentialRow): CredentialInfo =>
  withIntrospection(
    withPublicKey({ client_id: row.client_id, created_at: row.created_at, expires_at: row.expires_at, last_used_at: row.last_used_at }, row.secret_hash),
    row.introspect_profiles
  )

/** Each service with its credentials (all rows of one profile, or of one service). */
export const servicesWithCredentials = (
  services: ReadonlyArray<ServiceRow>,
  credentials: ReadonlyArray<CredentialRow>
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
