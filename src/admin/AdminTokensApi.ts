/**
 * Admin tokens managed at run time, and who is asking (docs/contract.md, scoped admin tokens):
 * `POST/GET/DELETE /admin/tokens` for admin tokens only, `GET /admin/session` for any admin token
 * (what the editor and the CLI show and hide by). Nothing here imports server code.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  ADMIN_TOKEN_ACTOR_NAME,
  ADMIN_TOKEN_NAME_PATTERN,
  ADMIN_TOKEN_NAME_RULE,
  AdminRole,
  isReservedAdminTokenName,
  RESERVED_ADMIN_TOKEN_NAME_RULE
} from "../domain/AdminRoles.js"
import { ConflictWire, InvalidRequestWire, NotFoundWire, StorageUnavailableWire } from "../domain/Errors.js"
import { ProfileId } from "../domain/Identifiers.js"
import { Timestamp } from "../domain/Models.js"
import { AdminAuth, adminGroup } from "./AdminApi.js"

const ADMIN_TOKEN_NAME_DESCRIPTION =
  `The token's name (${ADMIN_TOKEN_NAME_RULE}; ${RESERVED_ADMIN_TOKEN_NAME_RULE}), unique across ADMIN_TOKEN ` +
  "(`admin`), ADMIN_TOKENS and the stored tokens; the audit trail's actor for its changes."

export const AdminTokenName = Schema.String.pipe(
  Schema.pattern(ADMIN_TOKEN_NAME_PATTERN, { message: () => `name must be ${ADMIN_TOKEN_NAME_RULE}` }),
  // `admin` exactly is answered by the handler: 409 while ADMIN_TOKEN holds it, as any name taken.
  Schema.filter((name) => name === ADMIN_TOKEN_ACTOR_NAME || !isReservedAdminTokenName(name), {
    message: () => `name must be ${RESERVED_ADMIN_TOKEN_NAME_RULE}`
  })
).annotations({
  description: ADMIN_TOKEN_NAME_DESCRIPTION,
  jsonSchema: { type: "string", description: ADMIN_TOKEN_NAME_DESCRIPTION, pattern: ADMIN_TOKEN_NAME_PATTERN.source }
})

const ScopeProfiles = Schema.NullOr(Schema.Array(Schema.String)).annotations({
  description: "The profiles an owner, viewer or introspector token reaches; null for an admin token (every profile)."
})

export const NewAdminTokenRequest = Schema.Struct({
  name: AdminTokenName,
  role: AdminRole,
  profiles: Schema.optional(
    Schema.NullOr(Schema.Array(ProfileId)).annotations({
      description: "At least one profile name; required for owner, viewer and introspector, absent (or null) for admin."
    })
  )
}).pipe(
  Schema.filter((request) =>
    request.role === "admin"
      ? request.profiles == null || { path: ["profiles"], message: "an admin token reaches every profile: leave profiles out" }
      : (request.profiles != null && request.profiles.length > 0) ||
        { path: ["profiles"], message: `an ${request.role} token needs profiles: at least one profile name` }
  )
).annotations({ identifier: "NewAdminToken", parseOptions: { onExcessProperty: "error" } })

export const CreatedAdminToken = Schema.Struct({
  name: Schema.String,
  role: AdminRole,
  profiles: ScopeProfiles,
  token: Schema.String.annotations({
    description: "The bearer token: 256 random bits. This answer is the only place it ever appears; only its digest is stored."
  }),
  created_at: Timestamp
}).annotations({ identifier: "CreatedAdminToken" })

export const AdminTokenInfo = Schema.Struct({
  name: Schema.String,
  role: AdminRole,
  profiles: ScopeProfiles,
  created_at: Timestamp,
  last_used_at: Schema.NullOr(Timestamp).annotations({
    description: "The latest request made with it (recorded at most once a minute); null when never used."
  })
}).annotations({ identifier: "AdminTokenInfo" })

export const AdminTokenList = Schema.Struct({ tokens: Schema.Array(AdminTokenInfo) }).annotations({
  identifier: "AdminTokenList"
})

export const AdminSession = Schema.Struct({
  name: Schema.String.annotations({ description: "The token's name: `admin` for ADMIN_TOKEN, its name otherwise." }),
  role: AdminRole,
  profiles: ScopeProfiles
}).annotations({ identifier: "AdminSession" })

export class AdminTokensApi extends adminGroup(
  HttpApiGroup.make("adminTokens")
    .add(
      HttpApiEndpoint.post("createAdminToken", "/admin/tokens")
        .annotate(OpenApi.Summary, "Create an admin token")
        .setPayload(NewAdminTokenRequest)
        .addSuccess(CreatedAdminToken, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(ConflictWire)
        .annotate(
          OpenApi.Description,
          "Stores a new admin token with its role and, for owner, viewer and introspector, its profiles; the answer is the only " +
            "time the token is shown. 409 conflict when the name is taken (by ADMIN_TOKEN, ADMIN_TOKENS or a stored token)."
        )
    )
    .add(
      HttpApiEndpoint.get("listAdminTokens", "/admin/tokens")
        .annotate(OpenApi.Summary, "List the stored admin tokens")
        .annotate(OpenApi.Description, "Every stored token by name, never the token itself (the environment's tokens are not listed).")
        .addSuccess(AdminTokenList)
    )
    .add(
      HttpApiEndpoint.del("revokeAdminToken", "/admin/tokens/:name")
        .annotate(OpenApi.Summary, "Revoke an admin token")
        .annotate(
          OpenApi.Description,
          "Deletes the stored token: refused from the next request on, by every instance. 404 when no stored token has that name."
        )
        .setPath(Schema.Struct({ name: Schema.String.annotations({ description: "The stored token's name." }) }))
        .addSuccess(HttpApiSchema.Empty(204))
        .addError(NotFoundWire)
    )
)
  .annotate(OpenApi.Title, "Admin: admin tokens")
  .annotate(
    OpenApi.Description,
    "Admin tokens kept in the database and managed at run time, by admin tokens only (403 forbidden for the others). " +
      "Roles: `admin` (everything), `owner` (within its profiles, everything but creating or deleting them; not keys, " +
      "not tokens), `viewer` (within its profiles, reads only), `introspector` (within its profiles, POST /oauth/introspect only)."
  )
{}

export class SessionApi extends HttpApiGroup.make("session")
  .add(
    HttpApiEndpoint.get("getAdminSession", "/admin/session")
      .annotate(OpenApi.Summary, "Who is asking")
      .annotate(OpenApi.Description, "The admin token's name, role and profiles: what the editor and the CLI show and hide by.")
      .addSuccess(AdminSession)
  )
  .middleware(AdminAuth)
  .addError(StorageUnavailableWire)
  .annotate(OpenApi.Title, "Admin: session")
  .annotate(OpenApi.Description, "Any admin token may ask what it is.")
{}
