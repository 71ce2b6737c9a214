/**
 * The audit trail's records (docs/contract.md §3): what an admin change records, and how the trail
 * is answered at `GET /admin/audit`. An event never holds a secret: the actor is the name of an
 * admin token, a credential is named by its client id, and `details` holds only the few facts
 * listed with each action below (never a proxy URL, which may carry credentials of its own).
 */
import { Schema } from "effect"
import type { AdminActorShape } from "./AdminActor.js"
import { Timestamp } from "./Models.js"

/**
 * Every action the trail records. A deletion that takes credentials with it (a profile, an
 * environment, a service) records one `credential.removed` per live credential it removed, with
 * `details.cause`, so that "who removed client X" is always answerable.
 */
export const AUDIT_ACTIONS = [
  "profile.created",
  "profile.deleted",
  /** The profile's credential policy changed (`PUT /admin/profiles/{profile}` with credential_max_lifetime_days). */
  "profile.changed",
  /** A `save` of the profile editor; each of its changes is recorded too (`credential.*`). */
  "profile.saved",
  "environment.created",
  "environment.deleted",
  "service.created",
  "service.changed",
  "service.deleted",
  "credential.added",
  "credential.removed",
  /** Which profiles' tokens the credential may introspect changed (details `introspect_profiles`). */
  "credential.changed",
  /** A credential reached its `expires_at`: recorded once, by the server (actor `credential-expiry`, source `server`). */
  "credential.expired",
  "key.rotated",
  /** An admin token stored (`POST /admin/tokens`); details `name`, `role`, `profiles`, never the token. */
  "admin_token.created",
  /** A stored admin token revoked (`DELETE /admin/tokens/{name}`); details as for its creation. */
  "admin_token.revoked",
  /** A trusted issuer registered, replaced or deleted (`/admin/trusted-issuers`); details `name`, `issuer`. */
  "trusted_issuer.created",
  "trusted_issuer.changed",
  "trusted_issuer.deleted",
  /**
   * An access token revoked by its client (`POST /oauth/revoke`): the actor is the client id;
   * details `jti`, never the token.
   */
  "token.revoked"
] as const
export const AuditAction = Schema.Literal(...AUDIT_ACTIONS).annotations({
  identifier: "AuditAction",
  description: "What was done."
})
export type AuditAction = typeof AuditAction.Type

/** Small facts about a change: names, counts, flags. Never a secret. */
export const AuditDetails = Schema.Record({
  key: Schema.String,
  value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Array(Schema.String))
}).annotations({
  identifier: "AuditDetails",
  description: "Facts about the change: `service.created`/`service.changed`: `name`, `auth_type`, `handler` (its type); " +
    "`profile.saved`: `added`, `removed` (counts); a `credential.removed` implied by a deletion: `cause` " +
    "(`profile.deleted`, `environment.deleted` or `service.deleted`); `admin_token.created`/`admin_token.revoked`: " +
    "`name`, `role`, `profiles` (a list of profile names; absent for an admin token); `token.revoked`: `jti` " +
    "(the revoked token's id, never the token); `credential.expired`: `expires_at`; " +
    "`profile.created`/`profile.changed`: `credential_max_lifetime_days` (absent: none), `upstream_origins` (a list " +
    "of origins) when set or changed; " +
    "`service.*`: `rate_limit` (`<requests>/<seconds>s`) when set, `require_dpop` (true) when set; " +
    "`credential.changed`: `introspect_profiles` (the profiles whose tokens it may introspect; empty: none)."
})
export type AuditDetails = typeof AuditDetails.Type

/** What a change records; the time, actor and source are stamped by `auditEvent`. */
export interface AuditEntry {
  readonly action: AuditAction
  readonly profile: string | null
  readonly environment: string | null
  readonly service_uuid: string | null
  readonly client_id: string | null
  readonly details: AuditDetails | null
}

/** One event of the trail, as stored and answered. */
export interface AuditEvent extends AuditEntry {
  readonly time: Date
  /** The admin token's name. */
  readonly actor: string
  /** The remote address of the request. */
  readonly source: string
}

/** An entry stamped with the change's time and who made it. */
export const auditEvent = (actor: AdminActorShape, time: Date, entry: Partial<AuditEntry> & Pick<AuditEntry, "action">): AuditEvent => ({
  time,
  actor: actor.name,
  source: actor.source,
  action: entry.action,
  profile: entry.profile ?? null,
  environment: entry.environment ?? null,
  service_uuid: entry.service_uuid ?? null,
  client_id: entry.client_id ?? null,
  details: entry.details ?? null
})

const nullable = (description: string) => Schema.NullOr(Schema.String).annotations({ description })

export const AuditEventDocument = Schema.Struct({
  time: Timestamp.annotations({ description: "When the change was made." }),
  actor: Schema.String.annotations({
    description: "The name of the admin token that made it: `admin` for ADMIN_TOKEN, its name for one of ADMIN_TOKENS " +
      "or of the stored tokens; for `token.revoked`, the client id that revoked its token."
  }),
  source: Schema.String.annotations({ description: "The remote address the request came from (the TCP peer)." }),
  action: AuditAction,
  profile: nullable("The profile changed; null where not applicable."),
  environment: nullable("The environment; null where not applicable."),
  service_uuid: nullable("The service's uuid; null where not applicable."),
  client_id: nullable("The credential's client id; null where not applicable."),
  details: Schema.NullOr(AuditDetails)
}).annotations({ identifier: "AuditEvent" })

export const AuditEventPage = Schema.Struct({
  events: Schema.Array(AuditEventDocument).annotations({ description: "Newest first." }),
  next: Schema.NullOr(Schema.String).annotations({
    description: "Pass it as `after` to read the older events; null when there are none."
  })
}).annotations({ identifier: "AuditEventPage" })
export type AuditEventPage = typeof AuditEventPage.Type

/** The default and the largest page of `GET /admin/audit`. */
export const AUDIT_PAGE_DEFAULT = 50
export const AUDIT_PAGE_MAX = 500

/**
 * The cursor of a page is the id of its last (oldest) event, encoded so that clients treat it as
 * opaque. `decodeCursor` accepts only what `encodeCursor` makes.
 */
export const encodeCursor = (id: string): string => Buffer.from(`audit:${id}`, "utf8").toString("base64url")
export const decodeCursor = (cursor: string): string | undefined => {
  const match = /^audit:([1-9][0-9]{0,18})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"))
  return match !== null && encodeCursor(match[1]!) === cursor ? match[1]! : undefined
}

/**
 * What to read: optionally one profile's events, or only those of `profiles` (a scoped admin
 * token's), at most `limit`, older than the cursor's event.
 */
export interface AuditQuery {
  readonly profile: string | undefined
  readonly profiles?: ReadonlyArray<string> | undefined
  readonly limit: number
  /** An event id (decimal) from `decodeCursor`. */
  readonly after: string | undefined
}
