/**
 * The rules of a profile save, as one pure function both repositories call after they have
 * locked and read the services a save touches: every service must exist, every removal must name
 * a live credential of its service, and no service may end with more than two live credentials.
 */
import { Either } from "effect"
import { CredentialLimitExceeded, NotFound } from "../domain/Errors.js"
import type { EnvironmentName, ServiceUuid } from "../domain/Identifiers.js"
import { MAX_CREDENTIALS } from "../domain/Limits.js"
import type { StoredChange } from "./CredentialRepo.js"

/** A touched service as read under lock: its live client ids, or undefined when it does not exist. */
export type ServiceSnapshot = ReadonlyMap<string, ReadonlyArray<string> | undefined>

export const serviceKey = (environment: EnvironmentName, uuid: ServiceUuid): string => `${environment}\u0000${uuid}`

export const checkCredentialChanges = (
  snapshot: ServiceSnapshot,
  changes: ReadonlyArray<StoredChange>
): Either.Either<void, NotFound | CredentialLimitExceeded> => {
  const live = new Map<string, Set<string>>()
  for (const change of changes) {
    const key = serviceKey(change.environment, change.service_uuid)
    const existing = snapshot.get(key)
    if (existing === undefined) {
      return Either.left(
        new NotFound({
          description: `Service ${change.service_uuid} not found in environment ${change.environment}`
        })
      )
    }
    if (!live.has(key)) live.set(key, new Set(existing))
  }
  for (const change of changes) {
    if (change.op !== "remove_credential") continue
    const ids = live.get(serviceKey(change.environment, change.service_uuid))!
    if (!ids.delete(change.client_id)) {
      return Either.left(
        new NotFound({ description: `Credential ${change.client_id} is not a live credential of service ${change.service_uuid}` })
      )
    }
  }
  for (const change of changes) {
    if (change.op !== "add_credential") continue
    const ids = live.get(serviceKey(change.environment, change.service_uuid))!
    ids.add(change.client_id)
    if (ids.size > MAX_CREDENTIALS) {
      return Either.left(
        new CredentialLimitExceeded({
          description:
            `Service ${change.service_uuid} would hold more than ${MAX_CREDENTIALS} credentials; remove one first`
        })
      )
    }
  }
  return Either.right(undefined)
}
