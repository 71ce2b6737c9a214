/**
 * What the in-memory catalogue (`CatalogueInMemory`) holds for each profile, service and credential,
 * and the two comparisons it orders and replaces them by.
 */
import type { ClientId, EnvironmentName, ProfileId } from "../domain/Identifiers.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { ServiceFields } from "./CatalogueWrites.js"

export interface StoredService extends ServiceFields {
  readonly uuid: ServiceAddress["uuid"]
  readonly createdAt: Date
  readonly order: number
}

export interface StoredCredential {
  readonly clientId: ClientId
  readonly profile: ProfileId
  readonly environment: EnvironmentName
  readonly serviceUuid: ServiceAddress["uuid"]
  readonly secretHash: string
  readonly createdAt: Date
  readonly order: number
  readonly expiresAt: Date | null
  lastUsedAt: Date | null
  deletedAt: Date | null
  expiryRecorded: boolean
  introspectProfiles: ReadonlyArray<ProfileId> | null
}

export interface StoredProfile {
  readonly createdAt: Date
  lifetimeDays: number | null
  upstreamOrigins: ReadonlyArray<string> | null
  readonly environments: Map<EnvironmentName, { readonly createdAt: Date; readonly services: Map<string, StoredService> }>
}

/** Whether a replacement would change nothing (the memory twin of SQL's IS DISTINCT FROM). */
export const sameFields = (a: ServiceFields, b: ServiceFields) =>
  a.name === b.name && a.auth_type === b.auth_type && JSON.stringify(a.handler) === JSON.stringify(b.handler) &&
  JSON.stringify(a.rate_limit ?? null) === JSON.stringify(b.rate_limit ?? null) &&
  (a.require_dpop === true) === (b.require_dpop === true) && (a.upstream_approved === true) === (b.upstream_approved === true)

export const byName = <A>(a: [string, A], b: [string, A]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
