/**
 * What each write of the catalogue records in the audit trail, built once for both repositories
 * (SQL and memory), from what the write actually did.
 */
import type { AdminActorShape } from "../domain/AdminActor.js"
import { CREDENTIAL_EXPIRY_ACTOR_NAME } from "../domain/AdminRoles.js"
import { type AuditAction, type AuditEvent, auditEvent } from "../domain/AuditEvents.js"
import type { ServiceFields, StoredChange, TokenRevocation } from "./CredentialRepo.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"

/** A live credential a deletion tombstoned. */
export interface RemovedCredential {
  readonly environment: string
  readonly service_uuid: string
  readonly client_id: string
}

/**
 * A deletion: one `credential.removed` per live credential it took with it (older events first, so
 * that the deletion itself is on top of the trail, newest first), then the deletion.
 */
export const deletionEvents = (
  actor: AdminActorShape,
  now: Date,
  deletion: { readonly action: AuditAction; readonly profile: string; readonly environment?: string; readonly service_uuid?: string },
  removed: ReadonlyArray<RemovedCredential>
): Array<AuditEvent> => [
  ...removed.map((credential) =>
    auditEvent(actor, now, {
      action: "credential.removed",
      profile: deletion.profile,
      ...credential,
      details: { cause: deletion.action }
    })
  ),
  auditEvent(actor, now, deletion)
]

/** A service created or changed: its name, auth_type and handler type (never a proxy URL). */
export const serviceEvent = (
  actor: AdminActorShape,
  now: Date,
  action: "service.created" | "service.changed",
  address: ServiceAddress,
  fields: ServiceFields
): AuditEvent =>
  auditEvent(actor, now, {
    action,
    profile: address.profile,
    environment: address.environment,
    service_uuid: address.uuid,
    details: {
      name: fields.name,
      auth_type: fields.auth_type,
      handler: fields.handler.type,
      // Only when set, so that the events of services without one are as they always were.
      ...(fields.rate_limit == null ? {} : { rate_limit: `${fields.rate_limit.requests}/${fields.rate_limit.per_seconds}s` }),
      ...(fields.require_dpop === true ? { require_dpop: true } : {})
    }
  })

/**
 * A profile created (`profile.created`), or its policies changed (`profile.changed`):
 * `credential_max_lifetime_days` in the details when set, `upstream_origins` when set or changed
 * (`[]` when removed).
 */
export const profileEvent = (
  actor: AdminActorShape,
  now: Date,
  action: "profile.created" | "profile.changed",
  profile: string,
  lifetimeDays: number | null | undefined,
  upstreamOrigins?: ReadonlyArray<string> | null
): AuditEvent => {
  const details = {
    ...(lifetimeDays == null ? {} : { credential_max_lifetime_days: lifetimeDays }),
    ...(upstreamOrigins === undefined || (action === "profile.created" && upstreamOrigins === null)
      ? {}
      : { upstream_origins: upstreamOrigins ?? [] })
  }
  return auditEvent(actor, now, { action, profile, ...(Object.keys(details).length === 0 ? {} : { details }) })
}

/** Credential changes, one event each, then the `save` that made them when it was one. */
export const credentialEvents = (
  actor: AdminActorShape,
  now: Date,
  profile: string,
  changes: ReadonlyArray<StoredChange>,
  save: boolean
): Array<AuditEvent> => {
  const events = changes.map((change) =>
    auditEvent(actor, now, {
      action: change.op === "add_credential" ? "credential.added" : "credential.removed",
      profile,
      environment: change.environment,
      service_uuid: change.service_uuid,
      client_id: change.client_id
    })
  )
  if (!save) return events
  const added = changes.filter((change) => change.op === "add_credential").length
  return [
    ...events,
    auditEvent(actor, now, { action: "profile.saved", profile, details: { added, removed: changes.length - added } })
  ]
}

/** A token revoked by its client: the actor is the client id; the token is named by its `jti` only. */
export const revocationEvent = (actor: AdminActorShape, now: Date, revocation: TokenRevocation): AuditEvent =>
  auditEvent(actor, now, {
    action: "token.revoked",
    profile: revocation.address.profile,
    environment: revocation.address.environment,
    service_uuid: revocation.address.uuid,
    client_id: revocation.clientId,
    details: { jti: revocation.jti }
  })

/** Who records a credential's expiry: the server itself, not an admin. */
export const EXPIRY_ACTOR: AdminActorShape = { name: CREDENTIAL_EXPIRY_ACTOR_NAME, source: "server" }

/** A credential that reached its `expires_at`. */
export interface ExpiredCredential extends RemovedCredential {
  readonly profile: string
  readonly expires_at: Date
}

/** One `credential.expired` per credential, in client id order. */
export const expiryEvents = (now: Date, expired: ReadonlyArray<ExpiredCredential>): Array<AuditEvent> =>
  [...expired].sort((a, b) => (a.client_id < b.client_id ? -1 : 1)).map((credential) =>
    auditEvent(EXPIRY_ACTOR, now, {
      action: "credential.expired",
      profile: credential.profile,
      environment: credential.environment,
      service_uuid: credential.service_uuid,
      client_id: credential.client_id,
      details: { expires_at: credential.expires_at.toISOString() }
    })
  )
