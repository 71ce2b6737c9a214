/**
 * Credential lifecycle for operators (docs/contract.md §0): generate, remove, and the profile editor's
 * all-or-nothing save. Secrets exist in plain text only in the answer that creates them. Each takes
 * the admin who asks, which the repository records in the audit trail with the change.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { type CredentialLimitExceeded, InvalidRequest, type NotFound, type StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import { keyVerifier, type PublicJwk, publicKeyInfo } from "../domain/KeyCredential.js"
import type { CredentialChange, NewCredential, NewKeyCredential, SaveProfileResult } from "../domain/Models.js"
import { type FederatedIdentity, federatedVerifier } from "../domain/FederatedCredential.js"
import type { NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"
import { currentDate } from "../domain/Time.js"
import { CatalogueQueries } from "./CatalogueQueries.js"
import { CatalogueWrites } from "./CatalogueWrites.js"
import type { StoredChange } from "./CatalogueWrites.js"
import { type ServiceAddress } from "../domain/ServiceAddress.js"
import { ClientSecrets } from "./ClientSecrets.js"

type Failure = NotFound | CredentialLimitExceeded | InvalidRequest | StorageUnavailable

const DAY_MS = 86_400_000

/**
 * When a new credential expires: as asked, in the future and within the profile's policy
 * (`credential_max_lifetime_days`); when not asked, the policy's maximum, or never.
 */
export const expiryOf = (
  requested: Date | undefined,
  now: Date,
  maxDays: number | null,
  field = "expires_at"
): Effect.Effect<Date | null, InvalidRequest> => {
  if (requested === undefined) return Effect.succeed(maxDays === null ? null : new Date(now.getTime() + maxDays * DAY_MS))
  if (requested.getTime() <= now.getTime()) {
    return Effect.fail(new InvalidRequest({ description: `${field} must be in the future` }))
  }
  if (maxDays !== null && requested.getTime() > now.getTime() + maxDays * DAY_MS) {
    return Effect.fail(
      new InvalidRequest({
        description: `${field} must be at most ${maxDays} days ahead (the profile's credential_max_lifetime_days)`
      })
    )
  }
  return Effect.succeed(requested)
}

export interface CredentialManagerShape {
  /** `expiresAt`: when it expires (checked against the profile's policy); absent: the policy's maximum, or never. */
  readonly addCredential: (
    address: ServiceAddress,
    actor: AdminActorShape,
    expiresAt?: Date
  ) => Effect.Effect<NewCredential, Failure>
  /** A key credential (private_key_jwt): no secret, its checked public key stored instead; expiring as above. */
  readonly addKeyCredential: (
    address: ServiceAddress,
    publicKey: PublicJwk,
    actor: AdminActorShape,
    expiresAt?: Date
  ) => Effect.Effect<NewKeyCredential, Failure>
  /**
   * A federated credential: no secret, the identity its workload's token must carry stored instead
   * (the caller checked that its trusted issuer exists and allows the profile); expiring as above.
   */
  readonly addFederatedCredential: (
    address: ServiceAddress,
    identity: FederatedIdentity,
    actor: AdminActorShape,
    expiresAt?: Date
  ) => Effect.Effect<NewFederatedCredential, Failure>
  readonly removeCredential: (
    address: ServiceAddress,
    clientId: ClientId,
    actor: AdminActorShape
  ) => Effect.Effect<void, Failure>
  /** The profile editor's `save`: recorded as `profile.saved` besides each of its changes. */
  readonly saveProfile: (
    profile: ProfileId,
    changes: ReadonlyArray<CredentialChange>,
    actor: AdminActorShape
  ) => Effect.Effect<SaveProfileResult, Failure>
}

export class CredentialManager extends Context.Tag("service-auth/CredentialManager")<
  CredentialManager,
  CredentialManagerShape
>() {
  static readonly layer = Layer.effect(
    CredentialManager,
    Effect.gen(function*() {
      const queries = yield* CatalogueQueries
      const writes = yield* CatalogueWrites
      const secrets = yield* ClientSecrets

      const apply = (
        profile: ProfileId,
        staged: ReadonlyArray<CredentialChange>,
        actor: AdminActorShape,
        save: boolean
      ) =>
        Effect.gen(function*() {
          const now = yield* currentDate
          // The policy is read only for additions; a profile that does not exist fails in storage.
          const maxDays = staged.some((change) => change.op === "add_credential")
            ? Option.getOrNull(yield* queries.credentialLifetime(profile))
            : null
          const created: Array<SaveProfileResult["created"][number]> = []
          const removed: Array<SaveProfileResult["removed"][number]> = []
          const changes: Array<StoredChange> = []
          const federated: Array<NewFederatedCredential> = []
          for (const [index, change] of staged.entries()) {
            if (change.op === "remove_credential") {
              changes.push(change)
              removed.push({ environment: change.environment, service_uuid: change.service_uuid, client_id: change.client_id })
              continue
            }
            const expiresAt = yield* expiryOf(change.expires_at, now, maxDays, save ? `changes.${index}.expires_at` : "expires_at")
            const generated = yield* secrets.generate
            const stored = {
              op: change.op,
              environment: change.environment,
              service_uuid: change.service_uuid,
              client_id: generated.clientId,
              expires_at: expiresAt
            }
            if (change.federated !== undefined) {
              changes.push({ ...stored, secret_hash: federatedVerifier(change.federated) })
              federated.push({
                client_id: generated.clientId,
                created_at: now,
                ...(expiresAt === null ? {} : { expires_at: expiresAt }),
                federated: change.federated,
                token_endpoint_auth_method: "federated_jwt"
              })
              continue
            }
            if (change.public_key !== undefined) {
              const verifier = keyVerifier(change.public_key)
              changes.push({ ...stored, secret_hash: verifier })
              created.push({
                environment: change.environment,
                service_uuid: change.service_uuid,
                client_id: generated.clientId,
                created_at: now,
                ...(expiresAt === null ? {} : { expires_at: expiresAt }),
                public_key: publicKeyInfo(verifier)!,
                token_endpoint_auth_method: "private_key_jwt"
              })
              continue
            }
            changes.push({ ...stored, secret_hash: generated.secretHash })
            created.push({
              environment: change.environment,
              service_uuid: change.service_uuid,
              client_id: generated.clientId,
              client_secret: Redacted.value(generated.secret),
              created_at: now,
              ...(expiresAt === null ? {} : { expires_at: expiresAt }),
              token_endpoint_auth_method: "client_secret_basic"
            })
          }
          yield* writes.applyCredentialChanges(profile, changes, now, actor, { save })
          return { created, removed, federated }
        })

      /** One credential added to one service: a key credential's key, or a federated credential's identity. */
      const addOne = (
        address: ServiceAddress,
        verifier: { readonly public_key: PublicJwk } | { readonly federated: FederatedIdentity },
        actor: AdminActorShape,
        expiresAt: Date | undefined
      ) =>
        apply(
          address.profile,
          [{ op: "add_credential", environment: address.environment, service_uuid: address.uuid, ...verifier, expires_at: expiresAt }],
          actor,
          false
        )

      return CredentialManager.of({
        saveProfile: (profile, staged, actor) =>
          Effect.map(apply(profile, staged, actor, true), ({ created, removed }) => ({ created, removed })),
        addCredential: (address, actor, expiresAt) =>
          Effect.map(
            apply(
              address.profile,
              [{ op: "add_credential", environment: address.environment, service_uuid: address.uuid, expires_at: expiresAt }],
              actor,
              false
            ),
            ({ created: [credential] }) => ({
              client_id: credential!.client_id,
              client_secret: (credential as { readonly client_secret: string }).client_secret,
              created_at: credential!.created_at,
              ...(credential!.expires_at === undefined ? {} : { expires_at: credential!.expires_at }),
              token_endpoint_auth_method: "client_secret_basic" as const
            })
          ),
        addKeyCredential: (address, publicKey, actor, expiresAt) =>
          Effect.map(
            addOne(address, { public_key: publicKey }, actor, expiresAt),
            ({ created: [credential] }) => ({
              client_id: credential!.client_id,
              created_at: credential!.created_at,
              ...(credential!.expires_at === undefined ? {} : { expires_at: credential!.expires_at }),
              public_key: (credential as NewKeyCredential).public_key,
              token_endpoint_auth_method: "private_key_jwt" as const
            })
          ),
        addFederatedCredential: (address, identity, actor, expiresAt) =>
          Effect.map(addOne(address, { federated: identity }, actor, expiresAt), ({ federated: [credential] }) => credential!),
        removeCredential: (address, clientId, actor) =>
          Effect.asVoid(
            apply(
              address.profile,
              [{
                op: "remove_credential",
                environment: address.environment,
                service_uuid: address.uuid,
                client_id: clientId
              }],
              actor,
              false
            )
          )
      })
    })
  )
}
