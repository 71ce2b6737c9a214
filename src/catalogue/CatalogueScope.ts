/**
 * What a catalogue write changed, as the caches evict it: a whole profile, one environment of it,
 * or one service (a credential's changes are its service's). Announced on PostgreSQL after the
 * catalogue version, so that every instance evicts only that (docs/cache-coherence.md).
 */

/** `[profile]`, `[profile, environment]` or `[profile, environment, uuid]`. */
export type CatalogueScope =
  | readonly [profile: string]
  | readonly [profile: string, environment: string]
  | readonly [profile: string, environment: string, uuid: string]

/** Whether `scope` holds the service at this address. */
export const covers = (scope: CatalogueScope, profile: string, environment: string, uuid: string): boolean =>
  scope[0] === profile && (scope.length < 2 || scope[1] === environment) && (scope.length < 3 || scope[2] === uuid)

/** PostgreSQL refuses payloads of 8,000 bytes or more: the version and this stay well below. */
const MAX_PAYLOAD = 7_000

/**
 * What follows the version in the notification payload: the scopes as JSON. Scopes too many to fit
 * are widened to their profiles; if even those do not fit (or the write did not say), nothing
 * follows, which says "anything may have changed": every instance then empties its cache.
 */
export const announcedScopes = (scopes: ReadonlyArray<CatalogueScope> | undefined): string => {
  if (scopes === undefined) return ""
  const exact = ` ${JSON.stringify(scopes)}`
  if (exact.length <= MAX_PAYLOAD) return exact
  const profiles = ` ${JSON.stringify([...new Set(scopes.map((scope) => scope[0]))].map((p) => [p]))}`
  return profiles.length <= MAX_PAYLOAD ? profiles : ""
}

const isScope = (value: unknown): value is CatalogueScope =>
  Array.isArray(value) && value.length >= 1 && value.length <= 3 && value.every((part) => typeof part === "string")

/** A payload read back: undefined scopes when it says nothing (or nothing we understand) of what changed. */
export const parseAnnouncement = (
  payload: string
): { readonly version: bigint; readonly scopes: ReadonlyArray<CatalogueScope> | undefined } | undefined => {
  const match = /^(\d+)(?: (.*))?$/s.exec(payload)
  if (match === null) return undefined
  const version = BigInt(match[1]!)
  if (match[2] === undefined) return { version, scopes: undefined }
  try {
    const parsed: unknown = JSON.parse(match[2])
    return { version, scopes: Array.isArray(parsed) && parsed.every(isScope) ? parsed : undefined }
  } catch {
    return { version, scopes: undefined }
  }
}

/**
 * What each catalogue write may change in the cached answers, from its arguments (shared by the
 * cache, which evicts it, and by the SQL repository, which announces it). Creating a profile or an
 * environment changes no answer: neither holds a service yet.
 */
export const writeScopes = {
  created: (): ReadonlyArray<CatalogueScope> => [],
  /** `PUT /admin/profiles/{profile}`: its routes carry its `upstream_origins`, so setting them changes them all. */
  profilePolicy: (profile: string, upstreamOrigins: ReadonlyArray<string> | null | undefined): ReadonlyArray<CatalogueScope> =>
    upstreamOrigins === undefined ? [] : [[profile]],
  profile: (profile: string): ReadonlyArray<CatalogueScope> => [[profile]],
  environment: (profile: string, environment: string): ReadonlyArray<CatalogueScope> => [[profile, environment]],
  service: (address: { readonly profile: string; readonly environment: string; readonly uuid: string }) =>
    [[address.profile, address.environment, address.uuid]] as ReadonlyArray<CatalogueScope>,
  credentials: (
    profile: string,
    changes: ReadonlyArray<{ readonly environment: string; readonly service_uuid: string }>
  ): ReadonlyArray<CatalogueScope> => {
    const services = new Map<string, CatalogueScope>()
    for (const { environment, service_uuid } of changes) {
      services.set(`${environment}\u0000${service_uuid}`, [profile, environment, service_uuid])
    }
    return [...services.values()]
  }
}
