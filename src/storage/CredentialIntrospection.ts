/**
 * Which tokens a credential may introspect (`introspect_profiles`, migration 0012): the operator
 * lets a resource server's credential introspect the access tokens of listed profiles at
 * `POST /oauth/introspect`, where it authenticates as at the token endpoint. Stored with the
 * credential (null: none, it may not introspect); read with it by its client id alone
 * (`findClientCredential`) at every introspection, so a change holds on every instance from the
 * next request on, with no cache to evict. Both stores write it here: the memory twin and SQL.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { type AuditEvent, auditEvent } from "../domain/AuditEvents.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import type { CredentialInfo } from "../domain/Models.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { CredentialRepoShape } from "./CredentialRepo.js"
import { storageOperation } from "./StorageErrors.js"

/** The profiles as stored: sorted, each once; an empty list is none (null). */
export const introspectProfilesOf = (profiles: ReadonlyArray<ProfileId> | null | undefined): ReadonlyArray<ProfileId> | null =>
  profiles == null || profiles.length === 0 ? null : [...new Set(profiles)].sort()

/** A credential's document with its `introspect_profiles`, left out when none (as before the field existed). */
export const withIntrospection = (info: CredentialInfo, profiles: ReadonlyArray<ProfileId> | null): CredentialInfo =>
  profiles === null || profiles.length === 0 ? info : { ...info, introspect_profiles: profiles }

/** `credential.changed`, details `introspect_profiles` (the new list; empty: none). */
export const introspectionEvent = (
  actor: AdminActorShape,
  now: Date,
  address: ServiceAddress,
  clientId: ClientId,
  profiles: ReadonlyArray<ProfileId> | null
): AuditEvent =>
  auditEvent(actor, now, {
    action: "credential.changed",
    profile: address.profile,
    environment: address.environment,
    service_uuid: address.uuid,
    client_id: clientId,
    details: { introspect_profiles: [...(profiles ?? [])] }
  })

const sameProfiles = (a: ReadonlyArray<ProfileId> | null, b: ReadonlyArray<ProfileId> | null) =>
  JSON.stringify(a ?? []) === JSON.stringify(b ?? [])

/** A stored credential of the memory store, as far as introspection goes. */
export interface IntrospectingCredential {
  readonly clientId: ClientId
  readonly profile: ProfileId
  readonly environment: ServiceAddress["environment"]
  readonly serviceUuid: ServiceAddress["uuid"]
  readonly deletedAt: Date | null
  introspectProfiles: ReadonlyArray<ProfileId> | null
}

/** `setIntrospectProfiles` on the memory store: its credential (if any), and its log. */
export const setInMemory = (
  credential: IntrospectingCredential | undefined,
  address: ServiceAddress,
  profiles: ReadonlyArray<ProfileId> | null,
  now: Date,
  actor: AdminActorShape,
  append: (events: ReadonlyArray<AuditEvent>) => void
): Option.Option<boolean> => {
  if (
    credential === undefined || credential.deletedAt !== null || credential.profile !== address.profile ||
    credential.environment !== address.environment || credential.serviceUuid !== address.uuid
  ) return Option.none()
  const next = introspectProfilesOf(profiles)
  if (sameProfiles(credential.introspectProfiles, next)) return Option.some(false)
  credential.introspectProfiles = next
  append([introspectionEvent(actor, now, address, credential.clientId, next)])
  return Option.some(true)
}

/** `setIntrospectProfiles` on SQL: one conditional UPDATE of the live credential, its event in the same transaction. */
export const introspectionOperations = (
  sql: SqlClient.SqlClient,
  record: (events: ReadonlyArray<AuditEvent>) => Effect.Effect<void, SqlError.SqlError>
): Pick<CredentialRepoShape, "setIntrospectProfiles"> => ({
  setIntrospectProfiles: (address, clientId, profiles, now, actor) =>
    sql.withTransaction(Effect.gen(function*() {
      const next = introspectProfilesOf(profiles)
      const text = next === null ? null : JSON.stringify(next)
      const live = yield* sql`SELECT client_id FROM credentials
        WHERE client_id = ${clientId} AND profile = ${address.profile} AND environment = ${address.environment}
          AND service_uuid = ${address.uuid} AND deleted_at IS NULL FOR UPDATE`
      if (live.length === 0) return Option.none()
      // jsonb compares by value: the same list changes nothing and records nothing.
      const changed = yield* sql`UPDATE credentials SET introspect_profiles = ${text}::jsonb
        WHERE client_id = ${clientId} AND introspect_profiles IS DISTINCT FROM ${text}::jsonb RETURNING client_id`
      if (changed.length === 0) return Option.some(false)
      yield* record([introspectionEvent(actor, now, address, clientId, next)])
      return Option.some(true)
    })).pipe(storageOperation)
})
