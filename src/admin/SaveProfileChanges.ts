/**
 * A profile editor's `save`, between the wire and the credential manager: the staged changes as
 * sent (`ProfileChange`), checked into `CredentialChange`s, and the manager's result made into the
 * answer. A key credential added by `add_key_credential` is answered in `created_key_credentials`;
 * one added by `add_credential` with `public_key` (deprecated) in `created`, as it always was, with
 * `Deprecation` and `Sunset` on the answer.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { InvalidRequest } from "../domain/Errors.js"
import { ClientId, EnvironmentName, ServiceUuid } from "../domain/Identifiers.js"
import { parsePublicJwk, pemToJwk } from "../domain/KeyCredential.js"
import {
  type CreatedKeyCredential,
  type CredentialChange,
  DateTimeInput,
  type ProfileChange,
  type SaveProfileResult
} from "../domain/Models.js"
import { describeParseError } from "./DecodeFailure.js"
import { KEY_ON_CREDENTIALS_DEPRECATION, KEY_ON_CREDENTIALS_SUNSET } from "../domain/Deprecations.js"

/** A field of a staged change, checked as a path segment would be; the problem is prefixed by its place. */
const checked = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema)
  return (raw: string) => Effect.mapError(decode(raw), (error) => new InvalidRequest({ description: describeParseError(error) }))
}
const checkEnvironment = checked(EnvironmentName)
const checkUuid = (raw: string) => checked(ServiceUuid)(raw.toLowerCase())
const checkClientId = checked(ClientId)
const checkDateTime = checked(DateTimeInput)

/** A public key as sent (a JWK, or a PEM public key), checked. */
export const parsedPublicKey = (raw: unknown) =>
  typeof raw === "string" ? Either.flatMap(pemToJwk(raw), parsePublicJwk) : parsePublicJwk(raw)
/** A key credential's public key (a JWK, or a PEM public key); undefined when none was sent (a secret credential). */
const checkPublicKey = (raw: unknown) =>
  raw === undefined
    ? Effect.succeed(undefined)
    : Either.mapLeft(parsedPublicKey(raw), (problem) => new InvalidRequest({ description: problem }))

/** The checked changes, and how their additions are answered. */
export interface CheckedChanges {
  readonly staged: ReadonlyArray<CredentialChange>
  /** One per addition, in order: whether it is answered in `created_key_credentials`. */
  readonly answeredApart: ReadonlyArray<boolean>
  /** Whether an `add_credential` carried `public_key` (deprecated). */
  readonly deprecatedKey: boolean
}

/** Checks each staged change as sent; the first problem answers 400, prefixed by the change's place. */
export const checkChanges = (changes: ReadonlyArray<ProfileChange>) =>
  Effect.gen(function*() {
    const staged: Array<CredentialChange> = []
    const answeredApart: Array<boolean> = []
    let deprecatedKey = false
    const removing = new Set<string>()
    for (const [index, change] of changes.entries()) {
      const at = (error: InvalidRequest) => new InvalidRequest({ description: `changes.${index}.${error.description}` })
      const environment = yield* Effect.mapError(checkEnvironment(change.environment), at)
      const serviceUuid = yield* Effect.mapError(checkUuid(change.service_uuid), at)
      if (change.op !== "remove_credential") {
        const publicKey = yield* Effect.mapError(checkPublicKey(change.public_key), at)
        const expiresAt = change.expires_at === undefined
          ? undefined
          : yield* Effect.mapError(
            checkDateTime(change.expires_at),
            (error) => at(new InvalidRequest({ description: `expires_at: ${error.description}` }))
          )
        staged.push({
          op: "add_credential",
          environment,
          service_uuid: serviceUuid,
          expires_at: expiresAt,
          ...(publicKey === undefined ? {} : { public_key: publicKey })
        })
        answeredApart.push(change.op === "add_key_credential")
        if (change.op === "add_credential" && publicKey !== undefined) deprecatedKey = true
        continue
      }
      const clientId = yield* Effect.mapError(checkClientId(change.client_id), at)
      if (removing.has(clientId)) {
        return yield* new InvalidRequest({ description: `changes.${index}: credential ${clientId} is removed twice` })
      }
      removing.add(clientId)
      staged.push({ op: change.op, environment, service_uuid: serviceUuid, client_id: clientId })
    }
    return { staged, answeredApart, deprecatedKey } satisfies CheckedChanges
  })

/**
 * The save's answer: the manager's `created` (every addition, in order) with those of
 * `add_key_credential` moved to `created_key_credentials`; without one, the result as it is.
 */
export const saveAnswer = (result: SaveProfileResult, answeredApart: ReadonlyArray<boolean>): SaveProfileResult => {
  if (!answeredApart.includes(true)) return result
  return {
    created: result.created.filter((_, index) => answeredApart[index] !== true),
    created_key_credentials: result.created.filter((credential, index): credential is CreatedKeyCredential =>
      answeredApart[index] === true && credential.token_endpoint_auth_method === "private_key_jwt"
    ),
    removed: result.removed
  }
}

/** A save that used the deprecated form: the same answer, marked deprecated (RFC 9745) with its sunset (RFC 8594). */
export const deprecatedSaveAnswer = (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, { deprecation: KEY_ON_CREDENTIALS_DEPRECATION, sunset: KEY_ON_CREDENTIALS_SUNSET })
