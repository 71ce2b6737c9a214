/**
 * The repository suite's fixtures: the catalogue's services run against every storage layer (the
 * in-memory store, embedded PGlite and PostgreSQL), seen together (`Catalogue`). Whatever an
 * operation promises, all three must keep; each file of the suite covers one behaviour.
 */
import { layer, type Vitest } from "@effect/vitest"
import { Effect, type Layer, Option } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../../src/domain/Identifiers.js"
import type { StoredHandler as ServiceHandlerConfig } from "../../src/domain/Handlers.js"
import type { StoredChange } from "../../src/catalogue/CatalogueWrites.js"
import type { CatalogueServices } from "../../src/storage/Storage.js"
import { type ServiceAddress } from "../../src/domain/ServiceAddress.js"
import { TEST_ACTOR, uniqueName } from "../../src/testing.js"
import { Catalogue } from "./Catalogue.js"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./Databases.js"

export const T0 = new Date("2026-01-01T00:00:00.000Z")
export const T1 = new Date("2026-01-02T03:04:05.678Z")
export const T2 = new Date("2026-02-03T10:20:30.456Z")
export const T3 = new Date("2026-03-04T11:22:33.789Z")

export const PRODUCTION = "production" as EnvironmentName
export const STAGING = "staging" as EnvironmentName
export const ECHO: ServiceHandlerConfig = { type: "echo" }
export const PROXY: ServiceHandlerConfig = { type: "proxy", url: "https://upstream.example.test/api" }

export const newProfile = () => uniqueName("repo") as ProfileId
export const newUuid = () => randomUUID() as ServiceUuid
export const newClientId = () => `svc_${randomBytes(16).toString("hex")}` as ClientId
export const hashOf = (clientId: ClientId) => `hash-of-${clientId}`

export const add = (environment: EnvironmentName, serviceUuid: ServiceUuid, clientId: ClientId): StoredChange => ({
  op: "add_credential",
  environment,
  service_uuid: serviceUuid,
  client_id: clientId,
  secret_hash: hashOf(clientId)
})
export const remove = (environment: EnvironmentName, serviceUuid: ServiceUuid, clientId: ClientId): StoredChange => ({
  op: "remove_credential",
  environment,
  service_uuid: serviceUuid,
  client_id: clientId
})

/** A fresh profile with one environment and one service (no credentials). */
export const givenService = (options: {
  readonly environment?: EnvironmentName
  readonly authType?: "oauth" | "none"
  readonly handler?: ServiceHandlerConfig
} = {}) =>
  Effect.gen(function*() {
    const repo = yield* Catalogue
    const address: ServiceAddress = {
      profile: newProfile(),
      environment: options.environment ?? PRODUCTION,
      uuid: newUuid()
    }
    yield* repo.putProfile(address.profile, T0, TEST_ACTOR)
    yield* repo.putEnvironment(address.profile, address.environment, T0, TEST_ACTOR)
    yield* repo.putService(
      address,
      { name: "billing", auth_type: options.authType ?? "oauth", handler: options.handler ?? ECHO },
      "create",
      T0,
      TEST_ACTOR
    )
    return address
  })

/** Adds a service to an existing profile and environment. */
export const givenSibling = (address: ServiceAddress, environment: EnvironmentName = address.environment) =>
  Effect.gen(function*() {
    const repo = yield* Catalogue
    const sibling: ServiceAddress = { profile: address.profile, environment, uuid: newUuid() }
    yield* repo.putEnvironment(address.profile, environment, T0, TEST_ACTOR)
    yield* repo.putService(sibling, { name: "sibling", auth_type: "oauth", handler: ECHO }, "create", T0, TEST_ACTOR)
    return sibling
  })

/** Adds credentials to a service, one change set, and returns their ids. */
export const givenCredentials = (address: ServiceAddress, count: number, now: Date = T1) =>
  Effect.gen(function*() {
    const repo = yield* Catalogue
    const ids = Array.from({ length: count }, newClientId)
    yield* repo.applyCredentialChanges(address.profile, ids.map((id) => add(address.environment, address.uuid, id)), now, TEST_ACTOR)
    return ids
  })

export const liveClientIds = (address: ServiceAddress) =>
  Effect.flatMap(Catalogue, (repo) => repo.getService(address)).pipe(
    Effect.map((service) => Option.getOrThrow(service).credentials.map((c) => c.client_id))
  )

/** Whether `clientId` is live on `address`, as the token endpoint and the service endpoint see it. */
export const liveness = (address: ServiceAddress, clientId: ClientId) =>
  Effect.gen(function*() {
    const repo = yield* Catalogue
    const target = yield* repo.findTokenTarget(address, Option.some(clientId))
    const route = yield* repo.findServiceRoute(address, Option.some(clientId))
    return {
      token: Option.isSome(Option.flatMap(target, (t) => t.credential)),
      route: Option.match(route, { onNone: () => false, onSome: (r) => r.credentialLive })
    }
  })

type SuiteBody = (it: Vitest.MethodsNonLive<CatalogueServices, true>) => void

/** `body` run against each storage: memory, embedded PGlite, and PostgreSQL where there is one. */
export const onEveryStorage = (name: string, body: SuiteBody) => {
  const suite = (storage: Layer.Layer<CatalogueServices, unknown>, label: string) =>
    layer(storage, { excludeTestServices: true })(`${name} (${label})`, body)
  suite(memoryStorage, "memory")
  suite(embeddedStorage(), "embedded PGlite")
  describeWithPostgres("PostgreSQL", () => suite(postgresStorage(), "PostgreSQL"))
}
