/**
 * The names that address a service: profile, environment and uuid, and the generated client id.
 * Path segments and form fields are decoded leniently by the API and checked here, so that a bad
 * name answers with the contract's error body rather than the framework's decode error.
 */
import { Schema } from "effect"
import * as Limits from "./Limits.js"

/** Profile identifiers and environment names: URL-safe, no leading dot (so never `.` or `..`). */
const NAME_PATTERN = new RegExp(`^${Limits.NAME_PATTERN}$`)

export const ProfileId = Schema.String.pipe(
  Schema.pattern(NAME_PATTERN, {
    message: () => "profile must be 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
  }),
  Schema.brand("ProfileId")
).annotations({
  description: "A profile identifier: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit."
})
export type ProfileId = typeof ProfileId.Type

export const EnvironmentName = Schema.String.pipe(
  Schema.pattern(NAME_PATTERN, {
    message: () =>
      "environment must be 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
  }),
  Schema.brand("EnvironmentName")
).annotations({
  description: "An environment name within its profile: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit."
})
export type EnvironmentName = typeof EnvironmentName.Type

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** Service uuids are stored in canonical lower case; any casing is accepted on input (RFC 9562 §4). */
export const ServiceUuid = Schema.String.pipe(
  Schema.pattern(UUID_PATTERN, { message: () => "service uuid must be a UUID (8-4-4-4-12 hexadecimal digits)" }),
  Schema.brand("ServiceUuid")
).annotations({ description: "The service's UUID, in lower case (any case is accepted on input)." })
export type ServiceUuid = typeof ServiceUuid.Type

export const isProfileId = Schema.is(ProfileId)
export const isEnvironmentName = Schema.is(EnvironmentName)
export const isServiceUuid = Schema.is(ServiceUuid)

/** Canonical form of a uuid as written by a client, or undefined when it is not a uuid. */
export const canonicalServiceUuid = (raw: string): ServiceUuid | undefined => {
  const lower = raw.toLowerCase()
  return isServiceUuid(lower) ? lower : undefined
}

/** `svc_` followed by 32 lowercase hex digits (128 random bits). */
export const ClientId = Schema.String.pipe(
  Schema.pattern(/^svc_[0-9a-f]{32}$/, { message: () => "client id must be svc_ followed by 32 hexadecimal digits" }),
  Schema.brand("ClientId")
).annotations({ description: "A client id: svc_ followed by 32 hexadecimal digits (128 random bits)." })
export type ClientId = typeof ClientId.Type
export const isClientId = Schema.is(ClientId)
