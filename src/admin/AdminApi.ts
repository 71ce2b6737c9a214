/**
 * The admin JSON API (docs/contract.md §3): profiles, environments, services and credentials, behind the
 * admin token. Path parameters and payloads are branded schemas; a decode failure answers
 * `400 invalid_request` in the contract's error body (see `admin/AdminBodies.ts`).
 */
import {
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  HttpServerRequest,
  OpenApi
} from "@effect/platform"
import { EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { Schema } from "effect"
import { AdminActor } from "../domain/AdminActor.js"
import { AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, AuditEventPage, decodeCursor, encodeCursor } from "../domain/AuditEvents.js"
import {
  CredentialInfo,
  EmptyObject,
  EnvironmentDocument,
  ProfileDocument,
  ProfileSummary,
  SaveProfileRequest,
  SaveProfileResult
} from "../domain/Models.js"
import { RotatedKey, SigningKeyInfo } from "../domain/SigningKeyDocuments.js"
import { KEY_ON_CREDENTIALS_SUNSET } from "../domain/Deprecations.js"
import { ProfileInput } from "../domain/Policies.js"
import {
  AdminTooManyAttemptsWire,
  ConflictWire,
  CredentialLimitExceededWire,
  ForbiddenWire,
  InvalidRequestWire,
  NotFoundWire,
  PayloadTooLargeWire,
  StorageUnavailableWire,
  UnauthorizedWire
} from "../domain/Errors.js"

/**
 * Checks `Authorization: Bearer <token>` against every admin token (ADMIN_TOKEN, ADMIN_TOKENS, the
 * stored ones) on every admin endpoint, and provides who is asking with its role and profiles
 * (`AdminActor`). Failed attempts are throttled per remote address (429 with Retry-After).
 */
export class AdminAuth extends HttpApiMiddleware.Tag<AdminAuth>()("AdminAuth", {
  failure: Schema.Union(InvalidRequestWire, UnauthorizedWire, AdminTooManyAttemptsWire, StorageUnavailableWire),
  provides: AdminActor,
  security: { adminToken: HttpApiSecurity.bearer }
}) {}

/**
 * Admin bodies are read by the server's own reader (size limit, nesting limit, any Content-Type
 * read as JSON, no body as `{}`), provided in place of the request's JSON before HttpApi decodes
 * the payload.
 */
export class AdminBodies extends HttpApiMiddleware.Tag<AdminBodies>()("AdminBodies", {
  provides: HttpServerRequest.HttpServerRequest
}) {}

/** A service uuid in any case (RFC 9562 §4), stored in lower case. */
const ServiceUuidInAnyCase = Schema.transform(Schema.String, ServiceUuid, {
  strict: true,
  decode: (uuid) => uuid.toLowerCase(),
  encode: (uuid) => uuid
}).annotations({
  description: "The service's UUID (any case).",
  jsonSchema: { type: "string", format: "uuid", description: "The service's UUID (any case)." }
})

const ProfilePath = Schema.Struct({ profile: ProfileId })
export const EnvironmentPath = Schema.Struct({ profile: ProfileId, environment: EnvironmentName })
export const ServicePath = Schema.Struct({ profile: ProfileId, environment: EnvironmentName, uuid: ServiceUuidInAnyCase })
/** A client id that is not one names no credential: 404, checked by the handler, not 400. */
export const CredentialPath = Schema.Struct({
  profile: ProfileId,
  environment: EnvironmentName,
  uuid: ServiceUuidInAnyCase,
  client_id: Schema.String.annotations({ description: "The credential's client id." })
})

/**
 * An admin group that reads bodies: the body reader and the admin token check, and the refusals
 * every such group may answer besides its endpoints' own (403 forbidden, 413, 503).
 */
export const adminGroup = <
  Id extends string,
  Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any,
  E,
  R,
  TopLevel extends boolean
>(group: HttpApiGroup.HttpApiGroup<Id, Endpoints, E, R, TopLevel>) =>
  group
    .middleware(AdminBodies)
    .middleware(AdminAuth)
    .addError(ForbiddenWire)
    .addError(PayloadTooLargeWire)
    .addError(StorageUnavailableWire)

export const NoContent = HttpApiSchema.Empty(204)
export const created = <A, I>(schema: Schema.Schema<A, I>, description: string) =>
  [schema.annotations({ description }), { status: 201 }] as const

export const ProfileList = Schema.Struct({ profiles: Schema.Array(ProfileSummary) }).annotations({
  identifier: "ProfileList"
})
export const CredentialList = Schema.Struct({ credentials: Schema.Array(CredentialInfo) }).annotations({
  identifier: "CredentialList"
})

export class ProfilesApi extends adminGroup(
  HttpApiGroup.make("profiles")
    .add(
      HttpApiEndpoint.get("listProfiles", "/admin/profiles")
        .annotate(OpenApi.Summary, "List profiles")
        .annotate(OpenApi.Description, "Every profile the admin token reaches (all for an admin), by identifier, with its creation time.")
        .addSuccess(ProfileList)
    )
    .add(
      HttpApiEndpoint.put("putProfile", "/admin/profiles/:profile")
        .annotate(OpenApi.Summary, "Create a profile")
        .annotate(
          OpenApi.Description,
          "Creates the profile if it does not exist (201); answers it as it is otherwise (200). No body, `{}`, or " +
            "`{\"credential_max_lifetime_days\": N}` (1-3650; null removes it) to set its credential policy. `{\"upstream_origins\": [origin, ...]}` " +
            "(admin tokens only: 403 otherwise; null or [] removes them) sets the origins its proxy services may target besides UPSTREAM_ALLOWED_ORIGINS."
        )
        .setPath(ProfilePath)
        .setPayload(ProfileInput)
        .addSuccess(ProfileDocument.annotations({ description: "The profile existed." }))
        .addSuccess(...created(ProfileDocument, "The profile was created."))
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.get("getProfile", "/admin/profiles/:profile")
        .annotate(OpenApi.Summary, "Get a profile")
        .annotate(OpenApi.Description, "The profile with its environments, services and credentials (never a secret).")
        .setPath(ProfilePath)
        .addSuccess(ProfileDocument)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.del("deleteProfile", "/admin/profiles/:profile")
        .annotate(OpenApi.Summary, "Delete a profile")
        .setPath(ProfilePath)
        .addSuccess(NoContent)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .annotate(OpenApi.Description, "Deletes the profile and everything in it; its credentials' tokens die at once.")
    )
    .add(
      HttpApiEndpoint.post("saveProfile", "/admin/profiles/:profile/save")
        .annotate(OpenApi.Summary, "Save staged credential changes")
        .setPath(ProfilePath)
        .setPayload(SaveProfileRequest)
        .addSuccess(SaveProfileResult)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .addError(CredentialLimitExceededWire)
        .annotate(
          OpenApi.Description,
          "Applies the profile editor's staged credential changes in one transaction, all or nothing. " +
            "Each secret credential in created carries its client_secret: the only time it is ever shown. A key " +
            "credential is added with add_key_credential and answered in created_key_credentials. Deprecated: " +
            "add_credential with public_key still adds a key credential, answered in created as before, with " +
            "`Deprecation` and `Sunset` (" + KEY_ON_CREDENTIALS_SUNSET + ") headers; use add_key_credential."
        )
    )
    .add(
      HttpApiEndpoint.put("putEnvironment", "/admin/profiles/:profile/environments/:environment")
        .annotate(OpenApi.Summary, "Create an environment")
        .annotate(
          OpenApi.Description,
          "Creates the environment in the profile if it does not exist (201); answers it as it is otherwise (200). No body, or `{}`."
        )
        .setPath(EnvironmentPath)
        .setPayload(EmptyObject)
        .addSuccess(EnvironmentDocument.annotations({ description: "The environment existed." }))
        .addSuccess(...created(EnvironmentDocument, "The environment was created."))
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.del("deleteEnvironment", "/admin/profiles/:profile/environments/:environment")
        .annotate(OpenApi.Summary, "Delete an environment")
        .annotate(OpenApi.Description, "Deletes the environment with its services; their credentials' tokens die at once.")
        .setPath(EnvironmentPath)
        .addSuccess(NoContent)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
)
  .annotate(OpenApi.Title, "Admin: profiles and environments")
  .annotate(
    OpenApi.Description,
    "Operators manage the catalogue with an admin token as a Bearer token. A profile holds " +
      "environments; deleting either deletes what it holds, and its credentials' tokens die at once. An owner or " +
      "viewer token reaches only its profiles: any other answers exactly as a profile that does not exist (404); " +
      "what its role may not do answers 403 forbidden."
  )
{}

/** `limit`: a page of 1 to 500 events (50 when absent). */
const AuditLimit = Schema.transform(
  Schema.String.pipe(
    Schema.filter((raw) => /^[1-9][0-9]{0,2}$/.test(raw) && Number(raw) <= AUDIT_PAGE_MAX, {
      message: () => `limit must be an integer from 1 to ${AUDIT_PAGE_MAX}`
    })
  ),
  Schema.Number,
  { strict: true, decode: Number, encode: String }
).annotations({
  jsonSchema: {
    type: "integer",
    minimum: 1,
    maximum: AUDIT_PAGE_MAX,
    default: AUDIT_PAGE_DEFAULT,
    description: `How many events at most (1-${AUDIT_PAGE_MAX}, default ${AUDIT_PAGE_DEFAULT}).`
  }
})

/** `after`: the `next` cursor of an earlier page, decoded to the event id it stands for. */
const AuditCursor = Schema.transform(
  Schema.String.pipe(
    Schema.filter((raw) => decodeCursor(raw) !== undefined, {
      message: () => "after must be the next cursor of an earlier answer"
    })
  ),
  Schema.String,
  // Encoding makes the cursor again, so that a client built from this API sends what it was given.
  { strict: true, decode: (raw) => decodeCursor(raw)!, encode: encodeCursor }
).annotations({
  jsonSchema: { type: "string", description: "The `next` cursor of an earlier answer: the events older than that page." }
})

export const AuditQueryParams = Schema.Struct({
  profile: Schema.optional(ProfileId),
  limit: Schema.optional(AuditLimit),
  after: Schema.optional(AuditCursor)
})

export class AuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.get("listAuditEvents", "/admin/audit")
      .annotate(OpenApi.Summary, "Read the audit trail")
      .annotate(
        OpenApi.Description,
        "Admin changes, newest first: who (the admin token's name), from where, what, on which profile, " +
          "environment, service and credential. Optionally one profile's; page with `limit` and `after`. Never a secret. " +
          "An owner or viewer token reads only its profiles' events (another profile's answers as one without events); " +
          "an introspector token reads none (403)."
      )
      .setUrlParams(AuditQueryParams)
      .addSuccess(AuditEventPage)
      .addError(InvalidRequestWire)
      .addError(ForbiddenWire)
  )
  .middleware(AdminAuth)
  .addError(StorageUnavailableWire)
  .annotate(OpenApi.Title, "Admin: audit trail")
  .annotate(
    OpenApi.Description,
    "Every admin change is recorded with the change itself, in the same transaction: a change that fails leaves no event."
  )
{}

export const SigningKeyList = Schema.Struct({ keys: Schema.Array(SigningKeyInfo) }).annotations({
  identifier: "SigningKeyList"
})

export class KeysApi extends adminGroup(
  HttpApiGroup.make("keys")
    .add(
      HttpApiEndpoint.get("listKeys", "/admin/keys")
        .annotate(OpenApi.Summary, "List signing keys")
        .annotate(
          OpenApi.Description,
          "Every signing key, newest first, with its status and schedule (never private material). With " +
            "SIGNING_KEY_FILE, the file's key, active."
        )
        .addSuccess(SigningKeyList)
    )
    .add(
      HttpApiEndpoint.post("rotateKey", "/admin/keys/rotate")
        .annotate(OpenApi.Summary, "Rotate the signing key")
        .setPayload(EmptyObject)
        .addSuccess(RotatedKey, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(ConflictWire)
        .annotate(
          OpenApi.Description,
          "Makes a new RS256 key, published in the JWKS at once, that starts signing after KEY_PUBLISH_DELAY_S " +
            "(status next until then, or active at once when the delay is 0). The previous key keeps verifying " +
            "until its last token has expired (3600 s plus 60 s of tolerated clock skew after the switch), then " +
            "retires. 409 conflict while a key is already scheduled (next), and with SIGNING_KEY_FILE (rotation " +
            "is then the operator's). No body, or `{}`."
        )
    )
)
  .annotate(OpenApi.Title, "Admin: signing keys")
  .annotate(
    OpenApi.Description,
    "The RS256 keys that sign access tokens: their rotation schedule, shared by every instance on one database. " +
      "Admin tokens only (403 forbidden for the others)."
  )
{}
