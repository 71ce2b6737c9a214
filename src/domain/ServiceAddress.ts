/**
 * Where a service lives: the profile, environment and uuid of its path, as the token endpoint and
 * the service call address it, checked once from what a client wrote.
 */
import type { Option } from "effect"
import {
  canonicalServiceUuid,
  type ClientId,
  type EnvironmentName,
  isEnvironmentName,
  isProfileId,
  type ProfileId,
  type ServiceUuid
} from "./Identifiers.js"

/** A service and its credentials, addressed as the token endpoint and the service path do. */
export interface ServiceAddress {
  readonly profile: ProfileId
  readonly environment: EnvironmentName
  readonly uuid: ServiceUuid
}

/** The catalogue's order of services (profile, environment, uuid), in which the cache loads them. */
export const compareAddresses = (a: ServiceAddress, b: ServiceAddress): number =>
  a.profile !== b.profile
    ? (a.profile < b.profile ? -1 : 1)
    : a.environment !== b.environment
    ? (a.environment < b.environment ? -1 : 1)
    : a.uuid === b.uuid
    ? 0
    : a.uuid < b.uuid
    ? -1
    : 1

/** The address a client wrote (any uuid casing), checked; undefined when no service can have it. */
export const serviceAddress = (profile: string, environment: string, uuid: string): ServiceAddress | undefined => {
  const canonical = canonicalServiceUuid(uuid)
  return isProfileId(profile) && isEnvironmentName(environment) && canonical !== undefined
    ? { profile, environment, uuid: canonical }
    : undefined
}

/**
 * What a span records of a request's target: the service's address and the client id (an
 * identifier, not a secret; only one of our form, so nothing a client made up).
 */
export const spanAttributes = (address: ServiceAddress, clientId: Option.Option<ClientId>): Record<string, unknown> => ({
  "service_auth.profile": address.profile,
  "service_auth.environment": address.environment,
  "service_auth.service_uuid": address.uuid,
  ...(clientId._tag === "Some" ? { "service_auth.client_id": clientId.value } : {})
})

/**
 * The path of a service's calls, `/service/{profile}/{env}/json/{uuid}`: under the issuer, a token's
 * `aud` and the URL a DPoP proof signs (`htu`), the inverse of `resourceAddress`.
 */
export const servicePath = (address: ServiceAddress): string => `/service/${address.profile}/${address.environment}/json/${address.uuid}`

/**
 * The service a `resource` (RFC 8707) names: exactly `<issuer>/service/{profile}/{env}/json/{uuid}`,
 * the URL a token's `aud` holds; undefined for anything else (another origin or path, a query or a
 * fragment, percent-encoding, an identifier no service can have).
 */
export const resourceAddress = (issuer: string, resource: string): ServiceAddress | undefined => {
  const prefix = `${issuer}/service/`
  if (!resource.startsWith(prefix)) return undefined
  const parts = resource.slice(prefix.length).split("/")
  if (parts.length !== 4 || parts[2] !== "json") return undefined
  return serviceAddress(parts[0]!, parts[1]!, parts[3]!)
}
