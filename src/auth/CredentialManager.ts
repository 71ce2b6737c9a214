/**
 * Credential lifecycle for operators (docs/contract.md §0): generate, remove, and the profile editor's
 * all-or-nothing save. Secrets exist in plain text only in the answer that creates them.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import type { CredentialLimitExceeded, NotFound, StorageUnavailable } from "../domain/Errors.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import type { NewCredential, SaveProfileResult } from "../domain/Models.js"
import { currentDate } from "../domain/Time.js"
import { type CredentialChange, CredentialRepo, type ServiceAddress } from "../storage/CredentialRepo.js"
import { ClientSecrets } from "./ClientSecrets.js"

export type StagedChange =
  | { readonly op: "add_credential"; readonly environment: EnvironmentName; readonly serviceUuid: ServiceUuid }
  | {
    readonly op: "remove_credential"
    readonly environment: EnvironmentName
    readonly serviceUuid: ServiceUuid
    readonly clientId: ClientId
  }

type Failure = NotFound | CredentialLimitExceeded | StorageUnavailable

export interface CredentialManagerShape {
  readonly addCredential: (address: ServiceAddress) => Effect.Effect<NewCredential, Failure>
  readonly removeCredential: (address: ServiceAddress, clientId: ClientId) => Effect.Effect<void, Failure>
  readonly saveProfile: (
    profile: ProfileId,
    changes: ReadonlyArray<StagedChange>
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

      const saveProfile = (profile: ProfileId, staged: ReadonlyArray<StagedChange>) =>
        Effect.gen(function*() {
          const now = yield* currentDate
          const created: Array<SaveProfileResult["created"][number]> = []
          const removed: Array<SaveProfileResult["removed"][number]> = []
          const changes: Array<CredentialChange> = []
          for (const change of staged) {
            if (change.op === "remove_credential") {
              changes.push({ _tag: "Remove", environment: change.environment, serviceUuid: change.serviceUuid, clientId: change.clientId })
              removed.push({ environment: change.environment, service_uuid: change.serviceUuid, client_id: change.clientId })
              continue
            }
            const generated = yield* secrets.generate
            changes.push({
              _tag: "Add",
              environment: change.environment,
              serviceUuid: change.serviceUuid,
              clientId: generated.clientId,
              secretHash: generated.secretHash
            })
            created.push({
              environment: change.environment,
              service_uuid: change.serviceUuid,
              client_id: generated.clientId,
              client_secret: Redacted.value(generated.secret),
              created_at: now
            })
          }
          yield* repo.applyCredentialChanges(profile, changes, now)
          return { created, removed }
        })

      return CredentialManager.of({
        saveProfile,
        addCredential: (address) =>
          Effect.map(
            saveProfile(address.profile, [{ op: "add_credential", environment: address.environment, serviceUuid: address.uuid }]),
            ({ created: [credential] }) => ({
              client_id: credential!.client_id,
              client_secret: credential!.client_secret,
              created_at: credential!.created_at
            })
          ),
        removeCredential: (address, clientId) =>
          Effect.asVoid(
            saveProfile(address.profile, [{
              op: "remove_credential",
              environment: address.environment,
              serviceUuid: address.uuid,
              clientId
            }])
          )
      })
    })
  )
}
