/**
 * Records of the service catalogue as the admin API shows them. The same schemas type what the
 * repositories return, so storage and the wire cannot drift apart. Timestamps are `Date`s inside the
 * program and ISO 8601 strings on the wire.
 */
import { ParseResult, Schema } from "effect"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "./Identifiers.js"
import { ServiceHandlerConfig, ServiceHandlerInput } from "./Handlers.js"
import { SERVICE_NAME_MAX_LENGTH } from "./Limits.js"
import { type PublicJwk, PublicKeyInfo, publicKeyInfo } from "./KeyCredential.js"
import { FederatedIdentity, verifierIdentity } from "./FederatedCredential.js"
import { CredentialMaxLifetimeDays, emptyObjectOr, RateLimit } from "./Policies.js"
import { StorableText } from "./Text.js"
import { parseRfc3339 } from "./Time.js"

/** A point in time: a `Date` inside the program, an RFC 3339 date-time on the wire. */
export const Timestamp = Schema.Date.annotations({
  identifier: "Timestamp",
  description: "An RFC 3339 date-time in UTC, e.g. 2026-01-01T12:00:00.000Z.",
  jsonSchema: {
    type: "string",
    format: "date-time",
    description: "An RFC 3339 date-time in UTC, e.g. 2026-01-01T12:00:00.000Z."
  }
})

/** What every time the API accepts must be (`parseRfc3339`), in the words of a 400's description. */
export const DATE_TIME_RULE = "must be an RFC 3339 date-time with an offset and a four-digit year, e.g. 2027-01-01T00:00:00Z"

/**
 * A time the API accepts: an RFC 3339 date-time with its offset and a four-digit year, a real date
 * (`parseRfc3339`); anything else is refused with `DATE_TIME_RULE`, under the field's name. What is
 * accepted is what storage keeps and an export holds.
 */
export const DateTimeInput = Schema.transformOrFail(Schema.String, Schema.DateFromSelf, {
  strict: true,
  decode: (text, _, ast) => {
    const instant = parseRfc3339(text)
    return instant === undefined
      ? ParseResult.fail(new ParseResult.Type(ast, text, DATE_TIME_RULE))
      : ParseResult.succeed(new Date(instant))
  },
  encode: (date, _, ast) =>
    Number.isNaN(date.getTime())
      ? ParseResult.fail(new ParseResult.Type(ast, date, DATE_TIME_RULE))
      : ParseResult.succeed(date.toISOString())
}).annotations({
  identifier: "DateTimeInput",
  message: () => ({ message: DATE_TIME_RULE, override: true }),
  jsonSchema: {
    type: "string",
    format: "date-time",
    description: "An RFC 3339 date-time with its offset (Z or ±hh:mm) and a four-digit year, e.g. 2027-01-01T00:00:00Z."
  }
})

export const AuthType = Schema.Literal("oauth", "none").annotations({
  description: "`oauth` protects the service with OAuth 2.0 Client Credentials; `none` leaves it open."
})
export type AuthType = typeof AuthType.Type

/** When a credential stops working (as if deleted); null when it never does. */
const ExpiresAt = Schema.NullOr(Timestamp).annotations({
  description: "When the credential expires: from then on it is refused as if deleted (its tokens too), until it is " +
    "deleted; null when it never expires."
})

export const CredentialInfo = Schema.Struct({
  client_id: ClientId,
  created_at: Timestamp.annotations({ description: "When the credential was generated." }),
  expires_at: ExpiresAt,
  last_used_at: Schema.NullOr(Timestamp).annotations({
    description: "The last time the credential was used: a successful token request, or a service call made with a token it " +
      "issued. Recorded at most once a minute, so up to a minute behind the latest use; never moves backwards; null when " +
      "never used. A client may cache its token for the whole hour: only a credential still for an hour and a minute has no live token left."
  }),
  public_key: Schema.optional(PublicKeyInfo).annotations({
    description: "Only for a key credential (private_key_jwt): its public key's type, kid and thumbprint."
  }),
  introspect_profiles: Schema.optional(Schema.Array(ProfileId)).annotations({
    description: "The profiles whose access tokens this credential may introspect at POST /oauth/introspect (set by an " +
      "admin); absent when it may not introspect."
  }),
  federated: Schema.optional(FederatedIdentity).annotations({
    description: "Only for a federated credential: the trusted issuer, sub and claims its workload's token must carry."
  })
}).annotations({ identifier: "Credential" })
export type CredentialInfo = typeof CredentialInfo.Type

/** A credential as listed: with its `public_key` when its verifier is a key (`KeyCredential`). */
export const withPublicKey = (info: CredentialInfo, verifier: string): CredentialInfo => {
  const publicKey = publicKeyInfo(verifier)
  if (publicKey !== undefined) return { ...info, public_key: publicKey }
  const federated = verifierIdentity(verifier)
  return federated === undefined ? info : { ...info, federated }
}

export const ServiceDocument = Schema.Struct({
  uuid: ServiceUuid,
  name: Schema.String.annotations({ description: "A name for people; not unique." }),
  auth_type: AuthType,
  handler: ServiceHandlerConfig,
  rate_limit: Schema.optional(RateLimit).annotations({ description: "The per-client rate limit; absent when none." }),
  require_dpop: Schema.optional(Schema.Boolean).annotations({
    description: "true when the service accepts only DPoP-bound tokens (RFC 9449); absent when it accepts Bearer tokens too."
  }),
  upstream_refusal: Schema.optional(Schema.String).annotations({
    description: "Present only when the proxy's upstream is outside the upstream policy: why. Its calls then answer " +
      "502 bad_gateway until an admin saves the service or allows its origin."
  }),
  credentials: Schema.Array(CredentialInfo)
}).annotations({ identifier: "Service" })
export type ServiceDocument = typeof ServiceDocument.Type

export const EnvironmentDocument = Schema.Struct({
  name: EnvironmentName,
  services: Schema.Array(ServiceDocument)
}).annotations({ identifier: "Environment" })
export type EnvironmentDocument = typeof EnvironmentDocument.Type

export const ProfileSummary = Schema.Struct({
  profile: ProfileId,
  created_at: Timestamp
}).annotations({ identifier: "ProfileSummary" })
export type ProfileSummary = typeof ProfileSummary.Type

export const ProfileDocument = Schema.Struct({
  profile: ProfileId,
  created_at: Timestamp,
  credential_max_lifetime_days: Schema.optional(CredentialMaxLifetimeDays),
  upstream_origins: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "The origins this profile's proxy services may target besides UPSTREAM_ALLOWED_ORIGINS, set by an " +
      "admin; absent when none."
  }),
  environments: Schema.Array(EnvironmentDocument)
}).annotations({ identifier: "Profile" })
export type ProfileDocument = typeof ProfileDocument.Type

/** The body of requests that carry no fields: `{}` (or no body at all). */
export const EmptyObject = Schema.Struct({}).pipe(
  Schema.filter(
    (value) => typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0,
    { message: () => "the body must be an empty JSON object" }
  )
).annotations({
  parseOptions: { onExcessProperty: "error" },
  identifier: "EmptyObject",
  description: "An empty JSON object; the body may also be left out.",
  jsonSchema: {
    type: "object",
    properties: {},
    additionalProperties: false,
    description: "An empty JSON object; the body may also be left out."
  }
})

/** What an operator sends to create or replace a service. */
export const ServiceInput = Schema.Struct({
  name: Schema.optional(StorableText.pipe(Schema.minLength(1), Schema.maxLength(SERVICE_NAME_MAX_LENGTH))).annotations({
    description: "A name for people, 1-200 characters; defaults to the current name, or empty."
  }),
  auth_type: AuthType,
  handler: Schema.optional(ServiceHandlerInput),
  rate_limit: Schema.optional(Schema.NullOr(RateLimit)).annotations({
    description: "The per-client rate limit; absent or null for none (a PUT replaces it, like the handler)."
  }),
  require_dpop: Schema.optional(Schema.Boolean).annotations({
    description: "true: the token endpoint issues only DPoP-bound tokens for the service (a request without a DPoP " +
      "proof is 400 invalid_request) and the gateway refuses Bearer tokens (401 with the DPoP challenge). Absent " +
      "or false: Bearer tokens are accepted too (a PUT replaces it, like the handler)."
  })
}).annotations({ identifier: "ServiceInput", parseOptions: { onExcessProperty: "error" } })
export type ServiceInput = typeof ServiceInput.Type

/** What `POST …/credentials` may send: when the new credential expires, or nothing. */
const EXPIRES_AT_INPUT = "When the credential expires (RFC 3339, in the future; at most the profile's " +
  "credential_max_lifetime_days ahead). Absent: the policy's maximum, or never when the profile has none."
const CREDENTIAL_INPUT_DESCRIPTION = "`{}` (or no body), or when the new credential expires."
const ExpiresAtInput = DateTimeInput
export const CredentialInput = emptyObjectOr(Schema.Struct({ expires_at: Schema.optional(ExpiresAtInput) }), ["expires_at"], {
  identifier: "CredentialInput",
  description: CREDENTIAL_INPUT_DESCRIPTION,
  jsonSchema: {
    type: "object",
    properties: { expires_at: { type: "string", format: "date-time", description: EXPIRES_AT_INPUT } },
    additionalProperties: false,
    description: CREDENTIAL_INPUT_DESCRIPTION
  }
})
export type CredentialInput = typeof CredentialInput.Type

const ClientSecretText = Schema.String.annotations({
  description: "The client secret (256 random bits, base64url). Shown only in this answer: store it now."
})

/**
 * How a new credential's client authenticates at the token endpoint, named as RFC 7591 §2 names it:
 * the member that tells a secret credential from a key credential in every answer that may carry
 * either (the OpenAPI document declares it their discriminator). A secret credential is answered
 * `client_secret_basic`, RFC 7591's default; `client_secret_post` is accepted for it all the same.
 */
export const SecretAuthMethod = Schema.Literal("client_secret_basic").annotations({
  description: "client_secret_basic (RFC 7591 §2): a secret credential; client_secret_post works for it as well."
})
export const KeyAuthMethod = Schema.Literal("private_key_jwt").annotations({
  description: "private_key_jwt (RFC 7591 §2, RFC 7523): a key credential; the client signs an assertion."
})

/** A credential as answered once, at generation: the only place its secret ever appears. */
export const NewCredential = Schema.Struct({
  client_id: ClientId,
  client_secret: ClientSecretText,
  created_at: Timestamp,
  expires_at: Schema.optional(Timestamp).annotations({ description: "When it expires; absent when it never does." }),
  token_endpoint_auth_method: SecretAuthMethod
}).annotations({ identifier: "NewCredential" })
export type NewCredential = typeof NewCredential.Type

/** A key credential as answered at creation: no secret, its public key's type, kid and thumbprint. */
export const NewKeyCredential = Schema.Struct({
  client_id: ClientId,
  created_at: Timestamp,
  expires_at: Schema.optional(Timestamp).annotations({ description: "When it expires; absent when it never does." }),
  public_key: PublicKeyInfo,
  token_endpoint_auth_method: KeyAuthMethod
}).annotations({ identifier: "NewKeyCredential" })
export type NewKeyCredential = typeof NewKeyCredential.Type

/**
 * A public key as sent: a JWK, or a PEM public key (SPKI); checked by `parsePublicJwk` (RSA of 2048-16384
 * bits, EC P-256, Ed25519; public members only).
 */
export const PublicJwkInput = Schema.Union(
  Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    identifier: "PublicJwk",
    description:
      "A public JWK (RFC 7517): RSA of 2048 to 16384 bits with the public exponent 65537 (e AQAB), EC P-256 or Ed25519; public members only.",
    jsonSchema: {
      type: "object",
      required: ["kty"],
      properties: { kty: { type: "string", enum: ["RSA", "EC", "OKP"] }, kid: { type: "string" } },
      description:
        "A public JWK (RFC 7517): RSA of 2048 to 16384 bits with the public exponent 65537 (e AQAB), EC P-256 or Ed25519; public members only."
    }
  }),
  Schema.String.annotations({ description: "A PEM public key (-----BEGIN PUBLIC KEY-----)." })
)

/** What an operator sends to create a key credential. */
export const KeyCredentialInput = Schema.Struct({
  // Checked first: a body without public_key and with a wrong expires_at is then refused for its
  // expires_at by each member of the credential payload's union (the first member's problem is told).
  expires_at: Schema.optional(ExpiresAtInput),
  public_key: PublicJwkInput
}).annotations({
  identifier: "KeyCredentialInput",
  parseOptions: { onExcessProperty: "error" }
})

/**
 * A change of a profile's credentials: one shape from the profile editor to storage. On the wire
 * (`ProfileChange`, in a `save`) its fields are plain strings, checked by the handler into
 * `CredentialChange`; an addition gets its generated credential (`GeneratedAddition`) before
 * storage writes it.
 */
const CHANGE_EXPIRES_AT = Schema.optional(Schema.String).annotations({
  description: "When the new credential expires (RFC 3339, in the future), as for POST …/credentials."
})
export const AddCredentialChange = Schema.Struct({
  op: Schema.Literal("add_credential"),
  environment: Schema.String,
  service_uuid: Schema.String,
  public_key: Schema.optional(PublicJwkInput).annotations({
    description: "Deprecated: use add_key_credential. A key credential (private_key_jwt) made this way is answered in " +
      "created, as before. Without it, a secret is generated."
  }),
  expires_at: CHANGE_EXPIRES_AT
})
/** A key credential (private_key_jwt) to add: answered in `created_key_credentials`, never in `created`. */
export const AddKeyCredentialChange = Schema.Struct({
  op: Schema.Literal("add_key_credential"),
  environment: Schema.String,
  service_uuid: Schema.String,
  public_key: Schema.propertySignature(PublicJwkInput).annotations({
    description: "The key credential's public key: a public JWK, or a PEM public key."
  }),
  expires_at: CHANGE_EXPIRES_AT
})
export const RemoveCredentialChange = Schema.Struct({
  op: Schema.Literal("remove_credential"),
  environment: Schema.String,
  service_uuid: Schema.String,
  client_id: Schema.String
})
export const ProfileChange = Schema.Union(AddCredentialChange, AddKeyCredentialChange, RemoveCredentialChange).annotations({
  identifier: "ProfileChange"
})
export type ProfileChange = typeof ProfileChange.Type

export type CredentialChange =
  | {
    readonly op: "add_credential"
    readonly environment: EnvironmentName
    readonly service_uuid: ServiceUuid
    /** A key credential's checked public key (`parsePublicJwk`); absent for a secret credential. */
    readonly public_key?: PublicJwk
    /** A federated credential's identity (its issuer checked to exist and allow the profile). */
    readonly federated?: FederatedIdentity
    readonly expires_at?: Date | undefined
  }
  | {
    readonly op: "remove_credential"
    readonly environment: EnvironmentName
    readonly service_uuid: ServiceUuid
    readonly client_id: ClientId
  }
export type CredentialAddition = Extract<CredentialChange, { readonly op: "add_credential" }>
export type CredentialRemoval = Extract<CredentialChange, { readonly op: "remove_credential" }>
/**
 * An addition with its generated credential: what storage writes (never the secret, only its digest;
 * for a key credential, its public key: `keyVerifier`).
 */
export type GeneratedAddition = Omit<CredentialAddition, "expires_at"> & {
  readonly client_id: ClientId
  readonly secret_hash: string
  /** The expiry asked for, or given by the profile's policy; null or absent: never. */
  readonly expires_at?: Date | null | undefined
}

export const SaveProfileRequest = Schema.Struct({
  changes: Schema.Array(ProfileChange).pipe(Schema.maxItems(100))
}).annotations({ identifier: "SaveProfileRequest", parseOptions: { onExcessProperty: "error" } })
export type SaveProfileRequest = typeof SaveProfileRequest.Type

const EXPIRES = Schema.optional(Timestamp).annotations({ description: "When it expires; absent when it never does." })
export const CreatedSecretCredential = Schema.Struct({
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  client_id: ClientId,
  client_secret: ClientSecretText,
  created_at: Timestamp,
  expires_at: EXPIRES,
  token_endpoint_auth_method: SecretAuthMethod
}).annotations({ identifier: "CreatedSecretCredential" })
export const CreatedKeyCredential = Schema.Struct({
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  client_id: ClientId,
  created_at: Timestamp,
  expires_at: EXPIRES,
  public_key: PublicKeyInfo,
  token_endpoint_auth_method: KeyAuthMethod
}).annotations({ identifier: "CreatedKeyCredential" })
export type CreatedKeyCredential = typeof CreatedKeyCredential.Type
/** A credential a save made: `created` may still hold a key credential, for the deprecated add_credential with public_key. */
export const CreatedCredential = Schema.Union(CreatedSecretCredential, CreatedKeyCredential).annotations({
  identifier: "CreatedCredential"
})

export const RemovedCredential = Schema.Struct({
  environment: EnvironmentName,
  service_uuid: ServiceUuid,
  client_id: ClientId
}).annotations({ identifier: "RemovedCredential" })

/** A save's answer; `created_key_credentials` only after an add_key_credential, so other saves answer as always. */
export const SaveProfileResult = Schema.Struct({
  created: Schema.Array(CreatedCredential).annotations({
    description: "The secret credentials made by add_credential, each with its client_secret: the only time it is shown. " +
      "A key credential made by add_credential with public_key (deprecated) is answered here too, as before."
  }),
  created_key_credentials: Schema.optional(Schema.Array(CreatedKeyCredential)).annotations({
    description: "The key credentials made by add_key_credential; present only when the save had such a change."
  }),
  removed: Schema.Array(RemovedCredential)
}).annotations({ identifier: "SaveProfileResult" })
export type SaveProfileResult = typeof SaveProfileResult.Type
