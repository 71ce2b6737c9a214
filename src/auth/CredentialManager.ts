/**
 * Credential lifecycle for operators (docs/contract.md §0): generate, remove, and the profile editor's
 * all-or-nothing save. Secrets exist in plain text only in the answer that creates them. Each takes
 * the admin who asks, which the repository records in the audit trail with the change.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import type { CredentialLimitExceeded, NotFound, StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import { keyVerifier, type PublicJwk, publicKeyInfo } from "../domain/KeyCredential.js"
import type { CredentialChange, NewCredential, NewKeyCredential, SaveProfileResult } from "../domain/Models.js"
import { currentDate } from "../domain/Time.js"
import { CredentialRepo, type StoredChange } from "../storage/CredentialRepo.js"
import { type ServiceAddress } from "../domain/ServiceAddress.js"
import { ClientSecrets } from "./ClientSecrets.js"

type Failure = NotFound | CredentialLimitExceeded | StorageUnavailable

export interface CredentialManagerShape {
  readonly addCredential: (address: ServiceAddress, actor: AdminActorShape) => Effect.Effect<NewCredential, Failure>
  /** A key credential (private_key_jwt): no secret, its checked public key stored instead. */
  readonly addKeyCredential: (
    address: ServiceAddress,
    publicKey: PublicJwk,
    actor: AdminActorShape
  ) => Effect.Effect<NewKeyCredential, Failure>
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
      const repo = yield* CredentialRepo
      const secrets = yield* ClientSecrets

      const apply = (
        profile: ProfileId,
        staged: ReadonlyArray<CredentialChange>,
        actor: AdminActorShape,
        save: boolean
      ) =>
        Effect.gen(function*() {
          const now = yield* currentDate
          const created: Array<SaveProfileResult["created"][number]> = []
          const removed: Array<SaveProfileResult["removed"][number]> = []
          const changes: Array<StoredChange> = []
          for (const change of staged) {
            if (change.op === "remove_credential") {
              changes.push(change)
              removed.push({ environment: change.environment, service_uuid: change.service_uuid, client_id: change.client_id })
              continue
            }
            const generated = yield* secrets.generate
            if (change.public_key !== undefined) {
              const verifier = keyVerifier(change.public_key)
              changes.push({ ...change, client_id: generated.clientId, secret_hash: verifier })
              created.push({
                environment: change.environment,
                service_uuid: change.service_uuid,
                client_id: generated.clientId,
                created_at: now,
                public_key: publicKeyInfo(verifier)!
              })
              continue
            }
            changes.push({ ...change, client_id: generated.clientId, secret_hash: generated.secretHash })
            created.push({
              environment: change.environment,
              service_uuid: change.service_uuid,
              client_id: generated.clientId,
              client_secret: Redacted.value(generated.secret),
              created_at: now
            })
          }
          yield* repo.applyCredentialChanges(profile, changes, now, actor, { save })
          return { created, removed }
        })

      return CredentialManager.of({
        saveProfile: (profile, staged, actor) => apply(profile, staged, actor, true),
        addCredential: (address, actor) =>
          Effect.map(
            apply(
              address.profile,
              [{ op: "add_credential", environment: address.environment, service_uuid: address.uuid }],
              actor,
              false
            ),
            ({ created: [credential] }) => ({
              client_id: credential!.client_id,
              client_secret: (credential as { readonly client_secret: string }).client_secret,
              created_at: credential!.created_at
            })
          ),
        addKeyCredential: (address, publicKey, actor) =>
          Effect.map(
            apply(
              address.profile,
              [{ op: "add_credential", environment: address.environment, service_uuid: address.uuid, public_key: publicKey }],
              actor,
              false
            ),
            ({ created: [credential] }) => ({
              client_id: credential!.client_id,
              created_at: credential!.created_at,
              public_key: (credential as NewKeyCredential).public_key
            })
          ),
        removeCredential: (address, clientId, actor) =>
          Effect.asVoid(
            apply(address.profile, [{
              op: "remove_credential",
              environment: address.environment,
              service_uuid: address.uuid,
              client_id: clientId
            }], actor, false)
          )
      })
    })
  )
}
