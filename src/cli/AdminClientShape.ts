/**
 * What the admin API's client for the command line offers (`AdminClient`): one method per admin
 * call the CLI makes, each failing with what the operator reads (`AdminCallError`).
 */
import type { Effect, Option } from "effect"
import type { CredentialList, ProfileList } from "../admin/AdminApi.js"
import type { AdminSession, AdminTokenList, CreatedAdminToken, NewAdminTokenRequest } from "../admin/AdminTokensApi.js"
import type { AuditEventPage } from "../domain/AuditEvents.js"
import type { FederatedCredentialInput, NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import type {
  CredentialInfo,
  EnvironmentDocument,
  NewCredential,
  NewKeyCredential,
  ProfileDocument,
  ServiceDocument,
  ServiceInput
} from "../domain/Models.js"
import type { TrustedIssuerDocument, TrustedIssuerInput } from "../domain/TrustedIssuers.js"
import type { AdminCallError } from "./AdminClientErrors.js"

/** What a call names: a profile, an environment in it, a service in that. */
export interface EnvironmentAddress {
  readonly profile: ProfileId
  readonly environment: EnvironmentName
}
export interface ServiceAddress extends EnvironmentAddress {
  readonly uuid: ServiceUuid
}

export interface AdminClientShape {
  /** The base URL the client talks to, for messages. */
  readonly baseUrl: string
  readonly listProfiles: () => Effect.Effect<typeof ProfileList.Type, AdminCallError>
  readonly getProfile: (profile: ProfileId) => Effect.Effect<ProfileDocument, AdminCallError>
  /** `created` is false when the profile already existed (200 rather than 201). */
  /**
   * `lifetimeDays`: sets the profile's credential_max_lifetime_days (null removes it; absent leaves it).
   * `upstreamOrigins` (admin tokens only): sets its upstream_origins (null removes them; absent leaves them).
   */
  readonly putProfile: (
    profile: ProfileId,
    lifetimeDays?: number | null,
    upstreamOrigins?: ReadonlyArray<string> | null
  ) => Effect.Effect<{ readonly created: boolean; readonly profile: ProfileDocument }, AdminCallError>
  readonly deleteProfile: (profile: ProfileId) => Effect.Effect<void, AdminCallError>
  readonly putEnvironment: (
    address: EnvironmentAddress
  ) => Effect.Effect<{ readonly created: boolean; readonly environment: EnvironmentDocument }, AdminCallError>
  readonly deleteEnvironment: (address: EnvironmentAddress) => Effect.Effect<void, AdminCallError>
  readonly createService: (
    address: EnvironmentAddress,
    input: typeof ServiceInput.Encoded
  ) => Effect.Effect<ServiceDocument, AdminCallError>
  readonly deleteService: (address: ServiceAddress) => Effect.Effect<void, AdminCallError>
  readonly listCredentials: (address: ServiceAddress) => Effect.Effect<typeof CredentialList.Type, AdminCallError>
  /** `expiresAt`: when it expires (RFC 3339, as typed); absent: the profile's policy, or never. */
  readonly addCredential: (address: ServiceAddress, expiresAt?: string) => Effect.Effect<NewCredential, AdminCallError>
  /** A key credential (private_key_jwt): `publicKey` a JWK object or a PEM public key; expiring as above. */
  readonly addKeyCredential: (
    address: ServiceAddress,
    publicKey: unknown,
    expiresAt?: string
  ) => Effect.Effect<NewKeyCredential, AdminCallError>
  readonly removeCredential: (address: ServiceAddress, clientId: ClientId) => Effect.Effect<void, AdminCallError>
  /** Sets the profiles whose tokens the credential may introspect (empty: none); the credential as listed. */
  readonly setIntrospectProfiles: (
    address: ServiceAddress,
    clientId: ClientId,
    profiles: ReadonlyArray<ProfileId>
  ) => Effect.Effect<CredentialInfo, AdminCallError>
  readonly listAuditEvents: (query: {
    readonly profile: Option.Option<ProfileId>
    readonly limit: Option.Option<number>
    readonly after: Option.Option<string>
  }) => Effect.Effect<AuditEventPage, AdminCallError>
  readonly getSession: () => Effect.Effect<typeof AdminSession.Type, AdminCallError>
  readonly createAdminToken: (
    input: typeof NewAdminTokenRequest.Encoded
  ) => Effect.Effect<typeof CreatedAdminToken.Type, AdminCallError>
  readonly listAdminTokens: () => Effect.Effect<typeof AdminTokenList.Type, AdminCallError>
  readonly revokeAdminToken: (name: string) => Effect.Effect<void, AdminCallError>
  /** A federated credential: a trusted issuer's tokens with this subject (and claims) authenticate it. */
  readonly addFederatedCredential: (
    address: ServiceAddress,
    input: typeof FederatedCredentialInput.Encoded
  ) => Effect.Effect<NewFederatedCredential, AdminCallError>
  readonly listTrustedIssuers: () => Effect.Effect<ReadonlyArray<TrustedIssuerDocument>, AdminCallError>
  readonly getTrustedIssuer: (name: string) => Effect.Effect<TrustedIssuerDocument, AdminCallError>
  /** Registers a new issuer: 409 when the name is taken. */
  readonly createTrustedIssuer: (
    name: string,
    input: typeof TrustedIssuerInput.Encoded
  ) => Effect.Effect<TrustedIssuerDocument, AdminCallError>
  /** Replaces the issuer of that name whole (or registers it: `created`). */
  readonly putTrustedIssuer: (
    name: string,
    input: typeof TrustedIssuerInput.Encoded
  ) => Effect.Effect<{ readonly created: boolean; readonly issuer: TrustedIssuerDocument }, AdminCallError>
  readonly deleteTrustedIssuer: (name: string) => Effect.Effect<void, AdminCallError>
}
