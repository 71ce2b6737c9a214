/**
 * What an admin token may do (docs/contract.md, scoped admin tokens): one table, role × action, and
 * the profiles a scoped token reaches. The API decides with `authorize` on every admin path; the
 * editor and the CLI only follow what `GET /admin/session` tells them.
 *
 * - `admin`: everything (the environment's tokens, ADMIN_TOKEN and ADMIN_TOKENS, are admins).
 * - `owner`: within its profiles, everything the editor does; not creating or deleting profiles,
 *   not the signing keys, not the admin tokens.
 * - `viewer`: within its profiles, reads only.
 * - `introspector`: within its profiles, token introspection only (`POST /oauth/introspect`, for
 *   resource servers); every admin action is refused.
 *
 * A profile outside a token's scope is answered exactly as a profile that does not exist, before
 * the role is looked at, so that neither answer tells whether it exists.
 */
import { Either, Schema } from "effect"
import type { ProfileId } from "./Identifiers.js"
import { Forbidden, type NotFound } from "./Errors.js"

export const ADMIN_ROLES = ["admin", "owner", "viewer", "introspector"] as const
export const AdminRole = Schema.Literal(...ADMIN_ROLES).annotations({
  identifier: "AdminRole",
  description: "`admin`: everything; `owner`: within its profiles, everything but creating or deleting them; " +
    "`viewer`: within its profiles, reads only; `introspector`: within its profiles, token introspection " +
    "(POST /oauth/introspect) and nothing else."
})
export type AdminRole = typeof AdminRole.Type

/** The rule for an admin token's name, in ADMIN_TOKENS and in the store alike. */
export const ADMIN_TOKEN_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/
export const ADMIN_TOKEN_NAME_RULE = "1-64 letters, digits, '.', '_' or '-'"

/** The actors the server writes in the audit trail for its own changes (source `server`). */
export const CREDENTIAL_EXPIRY_ACTOR_NAME = "credential-expiry"
export const KEY_ROTATION_SCHEDULE_ACTOR_NAME = "key-rotation-schedule"
/** ADMIN_TOKEN's actor. */
export const ADMIN_TOKEN_ACTOR_NAME = "admin"

export const RESERVED_ADMIN_TOKEN_NAME_RULE =
  `neither ${CREDENTIAL_EXPIRY_ACTOR_NAME} nor ${KEY_ROTATION_SCHEDULE_ACTOR_NAME} (the server's own names in the ` +
  `audit trail), nor ${ADMIN_TOKEN_ACTOR_NAME} (ADMIN_TOKEN's), in any case, nor beginning with svc_ (a client id's form)`

/**
 * Whether a name would pass for another actor in the audit trail: the server's own, ADMIN_TOKEN's,
 * or a client's (its client id). A token of that name would make its changes look like theirs.
 */
export const isReservedAdminTokenName = (name: string): boolean => {
  const lower = name.toLowerCase()
  return lower === CREDENTIAL_EXPIRY_ACTOR_NAME || lower === KEY_ROTATION_SCHEDULE_ACTOR_NAME ||
    lower === ADMIN_TOKEN_ACTOR_NAME || lower.startsWith("svc_")
}

/** Everything the admin API does, as the permission table names it. */
export type AdminAction =
  | "profile.read"
  | "profile.create"
  /** Setting a profile's credential policy (`credential_max_lifetime_days`): a `PUT` of the profile, the admin's. */
  | "profile.policy"
  | "profile.delete"
  | "catalogue.change"
  /** Setting the origins a profile's proxy services may target (`upstream_origins`): the operator's decision. */
  | "upstream.allow"
  /** Letting a credential introspect the tokens of listed profiles (`introspect_profiles`): crosses profiles. */
  | "introspection.allow"
  | "audit.read"
  | "keys.manage"
  | "tokens.manage"
  | "issuers.manage"
  | "token.introspect"

/** Role × action: whether the role may, or what to answer when it may not. */
const PERMISSIONS: Readonly<Record<AdminRole, Readonly<Record<AdminAction, true | string>>>> = {
  admin: {
    "profile.read": true,
    "profile.create": true,
    "profile.policy": true,
    "profile.delete": true,
    "catalogue.change": true,
    "upstream.allow": true,
    "introspection.allow": true,
    "audit.read": true,
    "keys.manage": true,
    "tokens.manage": true,
    "issuers.manage": true,
    "token.introspect": true
  },
  owner: {
    "profile.read": true,
    "profile.create": "An owner token may not create profiles",
    "profile.policy": "Only an admin token may set a profile's credential lifetime (credential_max_lifetime_days)",
    "profile.delete": "An owner token may not delete profiles",
    "catalogue.change": true,
    "upstream.allow": "Only an admin token may set the origins a profile's services may target (upstream_origins)",
    "introspection.allow": "Only an admin token may allow a credential to introspect tokens (introspect_profiles)",
    "audit.read": true,
    "keys.manage": "Only an admin token may manage the signing keys",
    "tokens.manage": "Only an admin token may manage admin tokens",
    "issuers.manage": "Only an admin token may manage trusted issuers",
    "token.introspect": true
  },
  viewer: {
    "profile.read": true,
    "profile.create": "A viewer token may only read",
    "profile.policy": "A viewer token may only read",
    "profile.delete": "A viewer token may only read",
    "catalogue.change": "A viewer token may only read",
    "upstream.allow": "A viewer token may only read",
    "introspection.allow": "A viewer token may only read",
    "audit.read": true,
    "keys.manage": "Only an admin token may manage the signing keys",
    "tokens.manage": "Only an admin token may manage admin tokens",
    "issuers.manage": "Only an admin token may manage trusted issuers",
    "token.introspect": true
  },
  introspector: {
    "profile.read": "An introspector token may only introspect tokens",
    "profile.create": "An introspector token may only introspect tokens",
    "profile.policy": "An introspector token may only introspect tokens",
    "profile.delete": "An introspector token may only introspect tokens",
    "catalogue.change": "An introspector token may only introspect tokens",
    "upstream.allow": "An introspector token may only introspect tokens",
    "introspection.allow": "An introspector token may only introspect tokens",
    "audit.read": "An introspector token may only introspect tokens",
    "keys.manage": "Only an admin token may manage the signing keys",
    "tokens.manage": "Only an admin token may manage admin tokens",
    "issuers.manage": "Only an admin token may manage trusted issuers",
    "token.introspect": true
  }
}

/** Who is asking, as far as the permissions go: a role, and its profiles (null: every profile). */
export interface AdminScope {
  readonly role: AdminRole
  readonly profiles: ReadonlyArray<ProfileId> | null
}

/** Whether `profile` is within the scope. */
export const reaches = (scope: AdminScope, profile: string): boolean =>
  scope.profiles === null || scope.profiles.includes(profile as ProfileId)

/** Whether the role may do `action` at all (the editor and the CLI ask the same table). */
export const mayDo = (role: AdminRole, action: AdminAction): boolean => PERMISSIONS[role][action] === true

/** The decision for an action about no profile in particular: allowed, or 403. */
export const authorize = (scope: AdminScope, action: AdminAction): Either.Either<void, Forbidden> => {
  const permission = PERMISSIONS[scope.role][action]
  return permission === true ? Either.void : Either.left(new Forbidden({ description: permission }))
}

/**
 * The decision for `action` on `profile`: out of scope → `missing` (the endpoint's own answer for
 * a profile that does not exist), whatever the role; then a refused role → 403.
 */
export const authorizeOn = (
  scope: AdminScope,
  action: AdminAction,
  profile: string,
  missing: NotFound
): Either.Either<void, Forbidden | NotFound> => reaches(scope, profile) ? authorize(scope, action) : Either.left(missing)
