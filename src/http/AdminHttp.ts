/**
 * Handlers of the admin JSON API. Names in paths are checked here (400 with the reason), bodies are
 * decoded by `decodeJsonBody`, and every typed failure is answered by the wire schema its endpoint
 * declares.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../AppConfig.js"
import { Api } from "../api/Api.js"
import { CredentialManager } from "../auth/CredentialManager.js"
import { InvalidRequest, NotFound } from "../domain/Errors.js"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import {
  type CredentialChange,
  defaultHandler,
  EmptyObject,
  EnvironmentDocument,
  NewCredential,
  ProfileDocument,
  SaveProfileRequest,
  ServiceDocument,
  ServiceInput
} from "../domain/Models.js"
import { currentDate } from "../domain/Time.js"
import { CredentialRepo, type ServiceAddress } from "../storage/CredentialRepo.js"
import { decodeJsonBody, describeParseError } from "./RequestBody.js"
import * as AdminAuthHttp from "./AdminAuthHttp.js"
import { requiring } from "./GroupRequirements.js"

const checked = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema)
  return (raw: string) =>
    Effect.mapError(decode(raw), (error) => new InvalidRequest({ description: describeParseError(error) }))
}
const checkProfile = checked(ProfileId)
const checkEnvironment = checked(EnvironmentName)
const checkUuid = (raw: string) => checked(ServiceUuid)(raw.toLowerCase())

const serviceAddress = (path: { profile: string; environment: string; uuid: string }) =>
  Effect.all({
    profile: checkProfile(path.profile),
    environment: checkEnvironment(path.environment),
    uuid: checkUuid(path.uuid)
  })


/** Provides the admin-token check and states the groups' requirements (see `requiring`). */
const withAdminAuth = <A, E>(layer: Layer.Layer<A, E, unknown>) =>
  layer.pipe(requiring<AppConfig | CredentialRepo | CredentialManager>(), Layer.provide(AdminAuthHttp.layer))

/** A JSON answer encoded by its schema, with the status the handler chose (201 created or 200). */
const documentResponse = <A, I>(schema: Schema.Schema<A, I>, value: A, status: number) =>
  Effect.map(Schema.encode(schema)(value), (body) => HttpServerResponse.unsafeJson(body, { status })).pipe(Effect.orDie)

const profileNotFound = new NotFound({ description: "Profile not found" })
const environmentNotFound = new NotFound({ description: "Environment not found" })
const serviceNotFound = new NotFound({ description: "Service not found" })

export const layerProfiles = HttpApiBuilder.group(Api, "profiles", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const manager = yield* CredentialManager
    const { maxBodyBytes } = yield* AppConfig
    const body = <A, I>(request: HttpServerRequest.HttpServerRequest, schema: Schema.Schema<A, I>) =>
      decodeJsonBody(request, schema, maxBodyBytes)
    const getProfile = (profile: ProfileId) =>
      Effect.flatMap(repo.getProfile(profile), Option.match({ onNone: () => Effect.fail(profileNotFound), onSome: Effect.succeed }))

    return handlers
      .handle("listProfiles", () => Effect.map(repo.listProfiles, (profiles) => ({ profiles })))
      .handleRaw("putProfile", ({ path, request }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          yield* body(request, EmptyObject)
          const created = yield* repo.putProfile(profile, yield* currentDate)
          return yield* documentResponse(ProfileDocument, yield* getProfile(profile), created ? 201 : 200)
        }))
      .handle("getProfile", ({ path }) => Effect.flatMap(checkProfile(path.profile), getProfile))
      .handle("deleteProfile", ({ path }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          if (!(yield* repo.deleteProfile(profile, yield* currentDate))) return yield* profileNotFound
        }))
      .handleRaw("saveProfile", ({ path, request }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          const { changes } = yield* body(request, SaveProfileRequest)
          const staged: Array<CredentialChange> = []
          const removing = new Set<string>()
          for (const [index, change] of changes.entries()) {
            const at = (error: InvalidRequest) => new InvalidRequest({ description: `changes.${index}.${error.description}` })
            const environment = yield* Effect.mapError(checkEnvironment(change.environment), at)
            const serviceUuid = yield* Effect.mapError(checkUuid(change.service_uuid), at)
            if (change.op === "add_credential") {
              staged.push({ op: change.op, environment, service_uuid: serviceUuid })
              continue
            }
            const clientId = yield* Effect.mapError(checked(ClientId)(change.client_id), at)
            if (removing.has(clientId)) {
              return yield* new InvalidRequest({ description: `changes.${index}: credential ${clientId} is removed twice` })
            }
            removing.add(clientId)
            staged.push({ op: change.op, environment, service_uuid: serviceUuid, client_id: clientId })
          }
          return yield* manager.saveProfile(profile, staged)
        }))
      .handleRaw("putEnvironment", ({ path, request }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          const environment = yield* checkEnvironment(path.environment)
          yield* body(request, EmptyObject)
          const created = yield* repo.putEnvironment(profile, environment, yield* currentDate)
          const document = (yield* getProfile(profile)).environments.find((e) => e.name === environment)
          if (document === undefined) return yield* environmentNotFound // deleted concurrently
          return yield* documentResponse(EnvironmentDocument, document, created ? 201 : 200)
        }))
      .handle("deleteEnvironment", ({ path }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          const environment = yield* checkEnvironment(path.environment)
          if (!(yield* repo.deleteEnvironment(profile, environment, yield* currentDate))) {
            return yield* environmentNotFound
          }
        }))
  })).pipe(withAdminAuth)

export const layerServices = HttpApiBuilder.group(Api, "services", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const manager = yield* CredentialManager
    const { maxBodyBytes } = yield* AppConfig
    const getService = (address: ServiceAddress) =>
      Effect.flatMap(repo.getService(address), Option.match({ onNone: () => Effect.fail(serviceNotFound), onSome: Effect.succeed }))
    const putService = (request: HttpServerRequest.HttpServerRequest, address: ServiceAddress, mode: "create" | "upsert") =>
      Effect.gen(function*() {
        const input = yield* decodeJsonBody(request, ServiceInput, maxBodyBytes)
        const created = yield* repo.putService(
          address,
          { name: input.name ?? address.uuid, auth_type: input.auth_type, handler: input.handler ?? defaultHandler },
          mode,
          yield* currentDate
        )
        return yield* documentResponse(ServiceDocument, yield* getService(address), created ? 201 : 200)
      })

    return handlers
      .handleRaw("createService", ({ path, request }) =>
        Effect.gen(function*() {
          const profile = yield* checkProfile(path.profile)
          const environment = yield* checkEnvironment(path.environment)
          return yield* putService(request, { profile, environment, uuid: randomUUID() as ServiceUuid }, "create")
        }))
      .handleRaw("putService", ({ path, request }) =>
        Effect.flatMap(serviceAddress(path), (address) => putService(request, address, "upsert")))
      .handle("getService", ({ path }) => Effect.flatMap(serviceAddress(path), getService))
      .handle("deleteService", ({ path }) =>
        Effect.gen(function*() {
          const address = yield* serviceAddress(path)
          if (!(yield* repo.deleteService(address, yield* currentDate))) return yield* serviceNotFound
        }))
      .handle("listCredentials", ({ path }) =>
        Effect.gen(function*() {
          const service = yield* getService(yield* serviceAddress(path))
          return { credentials: service.credentials }
        }))
      .handleRaw("createCredential", ({ path, request }) =>
        Effect.gen(function*() {
          const address = yield* serviceAddress(path)
          yield* decodeJsonBody(request, EmptyObject, maxBodyBytes)
          return yield* documentResponse(NewCredential, yield* manager.addCredential(address), 201)
        }))
      .handle("deleteCredential", ({ path }) =>
        Effect.gen(function*() {
          const address = yield* serviceAddress(path)
          if (!Schema.is(ClientId)(path.client_id)) {
            // Not echoed: whatever was sent is not a client id (and might be a misplaced secret).
            return yield* new NotFound({ description: "No such live credential on this service" })
          }
          // A removal alone can never exceed the limit.
          yield* manager.removeCredential(address, path.client_id).pipe(Effect.catchTag("CredentialLimitExceeded", Effect.die))
        }))
  })).pipe(withAdminAuth)
