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
    message: () => "environment must be 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
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

/**
 * The schemas' own patterns as plain guards: these run on every token request and service call, where
 * `Schema.is` allocated its parse result each time (about 1.6 kB a call in an allocation profile).
 */
const matches = <A>(pattern: RegExp) => (u: unknown): u is A => typeof u === "string" && pattern.test(u)

export const isProfileId = matches<ProfileId>(NAME_PATTERN)
export const isEnvironmentName = matches<EnvironmentName>(NAME_PATTERN)
export const isServiceUuid = matches<ServiceUuid>(UUID_PATTERN)

/** Canonical form of a uuid as written by a client, or undefined when it is not a uuid. */
export const canonicalServiceUuid = (raw: string): ServiceUuid | undefined => {
  const lower = raw.toLowerCase()
  return isServiceUuid(lower) ? lower : undefined
}

/** `svc_` followed by 32 lowercase hex digits (128 random bits). */
const CLIENT_ID_PATTERN = /^svc_[0-9a-f]{32}$/

export const ClientId = Schema.String.pipe(
  Schema.pattern(CLIENT_ID_PATTERN, { message: () => "client id must be svc_ followed by 32 hexadecimal digits" }),
  Schema.brand("ClientId")
).annotations({ description: "A client id: svc_ followed by 32 hexadecimal digits (128 random bits)." })
export type ClientId = typeof ClientId.Type
export const isClientId = matches<ClientId>(CLIENT_ID_PATTERN)
