/**
 * The public test entry: the real HttpApi served in-process on a free port (`makeTestServer`), with
 * an `HttpClient` pointed at it, and the fixtures the project's own tests use. Storage defaults to
 * the in-memory repository, keys to a fixed test key; both can be swapped, e.g. for the embedded or
 * PostgreSQL storage. An embedding program tests its handlers with the same server.
 */
import { HttpClient, HttpClientRequest, type HttpClientResponse, HttpServer } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import { createServer } from "node:net"
import { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
import { layerDomainTest, layerServe, makeDomainLayer } from "./AppLayer.js"
import { ClientSecrets } from "./catalogue/ClientSecrets.js"
import { KeyEncryption } from "./keys/KeyEncryption.js"
import { KeyService } from "./keys/KeyService.js"
import { NO_TRUSTED_PROXIES } from "./server/ClientAddress.js"
import type { ServiceHandlers } from "./service-call/ServiceHandlers.js"
import * as FastLane from "./server/FastLane.js"
import * as NodeServer from "./server/NodeServer.js"
import { DEFAULT_CONNECTION_LIMITS } from "./server/ConnectionLimits.js"
import type { AdminTokenStore } from "./admin/AdminTokenStore.js"
import type { TrustedIssuerStore } from "./federation/TrustedIssuerStore.js"
import type { AuditTrail } from "./storage/AuditTrail.js"
import type { CatalogueServices } from "./storage/Storage.js"
import type { FailureCounts } from "./token/FailureCounts.js"
import type { ServerKeyStore } from "./keys/ServerKeyStore.js"
import type { SigningKeyStore } from "./keys/SigningKeyStore.js"
import * as Storage from "./storage/Storage.js"

/** A port of 127.0.0.1 free at the moment of asking (for servers a test starts). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.unref()
    probe.on("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      probe.close(() => resolve(port))
    })
  })

export const ADMIN_TOKEN = "test-admin-token"
/** Who makes the changes tests write straight into a repository (the audit trail's actor). */
export const TEST_ACTOR = { name: "test", source: "127.0.0.1" } as const

/** The live signing keys (stored, rotating, sealed as configured) over the test digest key. */
const layerDomainStoredKeys = makeDomainLayer({ keys: KeyService.layer, secrets: ClientSecrets.layerTest }).pipe(
  Layer.provideMerge(KeyEncryption.layer)
)

/**
 * The server `npm start` runs (`NodeServer`, with the fast path in front of the app) on a free port
 * of 127.0.0.1, and an `HttpClient` pointed at it: tests reach the path production serves.
 */
const layerNodeServer = Layer.unwrapEffect(
  Effect.map(Effect.promise(freePort), (port) =>
    HttpServer.layerTestClient.pipe(
      Layer.provide(NodeHttpClient.layerWithoutAgent),
      Layer.provide(NodeHttpClient.makeAgentLayer({ keepAlive: false })),
      Layer.provideMerge(NodeServer.layer({
        host: "127.0.0.1",
        port,
        shutdownGraceMs: 1_000,
        ...DEFAULT_CONNECTION_LIMITS,
        trustedProxies: NO_TRUSTED_PROXIES,
        tls: Option.none()
      })),
      Layer.provide(FastLane.layer)
    ))
)

/** What a test server's storage provides (every storage layer of Storage.ts holds the signing keys too). */
export type TestStorage =
  | CatalogueServices
  | AuditTrail
  | AdminTokenStore
  | TrustedIssuerStore
  | ServerKeyStore
  | FailureCounts

export const makeTestServer = (options: {
  readonly storage?: Layer.Layer<TestStorage, unknown>
  readonly config?: Partial<AppConfigShape>
  /** `test`: one fixed key (the default); `stored`: the live key rotation over the storage. */
  readonly keys?: "test" | "stored"
  /** Handlers registered in code (`ServiceHandlers.layerWith`); echo and proxy by default. */
  readonly handlers?: Layer.Layer<ServiceHandlers>
} = {}) =>
  layerServe.pipe(
    Layer.provideMerge(layerNodeServer),
    Layer.provideMerge(
      options.handlers === undefined
        ? (options.keys === "stored" ? layerDomainStoredKeys : layerDomainTest)
        : options.keys === "stored"
        ? makeDomainLayer({ keys: KeyService.layer, secrets: ClientSecrets.layerTest, handlers: options.handlers }).pipe(
          Layer.provideMerge(KeyEncryption.layer)
        )
        : makeDomainLayer({ keys: KeyService.layerTest, secrets: ClientSecrets.layerTest, handlers: options.handlers })
    ),
    // Every storage layer of Storage.ts holds the signing keys too; a hand-made one need not, with test keys.
    Layer.provideMerge(
      (options.storage ?? Storage.layerMemory) as Layer.Layer<
        TestStorage | SigningKeyStore,
        unknown
      >
    ),
    Layer.provideMerge(AppConfig.layerTest(options.config)),
    Layer.orDie
  )

/** The port of the in-process test server, for raw node:http requests. */
export const serverPort = Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  const address = server.address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("the test server is not on TCP")
  return address.port
})

/**
 * One fixture for the cases of a describe block that only read it: made on first use, then reused.
 * Cases that change what they use (delete it, exhaust a limit) make their own.
 */
export const sharedFixture = <A, E, R>(make: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  let made: { readonly value: A } | undefined
  return Effect.suspend(() =>
    made !== undefined ? Effect.succeed(made.value) : Effect.tap(make, (value) => Effect.sync(() => void (made = { value })))
  )
}

/** A fresh, unique name, so tests sharing a database never collide. */
export const uniqueName = (prefix: string) => `${prefix}-${randomBytes(6).toString("hex")}`

export interface JsonResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: any
  readonly text: string
}

const toJsonResponse = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.map(response.text, (text): JsonResponse => {
    let body: unknown = undefined
    try {
      body = text === "" ? undefined : JSON.parse(text)
    } catch {
      body = undefined
    }
    return { status: response.status, headers: response.headers, body, text }
  })

/** Sends a request and reads status, headers and body, whatever the status. */
export const send = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.flatMap(HttpClient.HttpClient, (client) => Effect.flatMap(client.execute(request), toJsonResponse)).pipe(
    Effect.scoped,
    Effect.orDie
  )

const adminRequest = (method: "GET" | "PUT" | "POST" | "DELETE", path: string, body?: unknown) => {
  const request = HttpClientRequest.make(method)(path).pipe(HttpClientRequest.bearerToken(ADMIN_TOKEN))
  return body === undefined ? request : HttpClientRequest.bodyUnsafeJson(request, body)
}

export const admin = {
  get: (path: string) => send(adminRequest("GET", path)),
  put: (path: string, body: unknown = {}) => send(adminRequest("PUT", path, body)),
  post: (path: string, body: unknown = {}) => send(adminRequest("POST", path, body)),
  delete: (path: string) => send(adminRequest("DELETE", path))
}

/** POSTs a form to the token endpoint. */
export const tokenRequest = (fields: Record<string, string> | string, headers: Record<string, string> = {}) =>
  send(
    HttpClientRequest.post("/oauth/token").pipe(
      typeof fields === "string"
        ? HttpClientRequest.bodyText(fields, "application/x-www-form-urlencoded")
        : HttpClientRequest.bodyUrlParams(fields),
      HttpClientRequest.setHeaders(headers)
    )
  )

export interface Fixture {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
  readonly clientId: string
  readonly clientSecret: string
  readonly servicePath: string
  readonly tokenFields: Record<string, string>
}

/** A profile, an environment, an oauth service and one credential on it. */
export const createFixture = (options: { readonly authType?: "oauth" | "none"; readonly handler?: unknown } = {}) =>
  Effect.gen(function*() {
    const profile = uniqueName("profile")
    const environment = "production"
    yield* admin.put(`/admin/profiles/${profile}`)
    yield* admin.put(`/admin/profiles/${profile}/environments/${environment}`)
    const service = yield* admin.post(`/admin/profiles/${profile}/environments/${environment}/services`, {
      name: "billing",
      auth_type: "oauth",
      ...(options.handler === undefined ? {} : { handler: options.handler })
    })
    const uuid: string = service.body.uuid
    const servicePath = `/admin/profiles/${profile}/environments/${environment}/services/${uuid}`
    const credential = yield* admin.post(`${servicePath}/credentials`)
    if (options.authType === "none") yield* admin.put(servicePath, { name: "billing", auth_type: "none" })
    return fixtureOf({ profile, environment, uuid }, credential.body)
  })

/** The fixture record of a service and one of its credentials (as the credential POST answered it). */
export const fixtureOf = (
  service: { readonly profile: string; readonly environment: string; readonly uuid: string },
  credential: { readonly client_id: string; readonly client_secret: string }
): Fixture => ({
  ...service,
  clientId: credential.client_id,
  clientSecret: credential.client_secret,
  servicePath: `/admin/profiles/${service.profile}/environments/${service.environment}/services/${service.uuid}`,
  tokenFields: {
    grant_type: "client_credentials",
    client_id: credential.client_id,
    client_secret: credential.client_secret,
    profile: service.profile,
    environment: service.environment,
    service_uuid: service.uuid
  }
})

/** Issues a token for the fixture through the token endpoint. */
export const issueToken = (fixture: Fixture) =>
  Effect.map(tokenRequest(fixture.tokenFields), (response) => {
    if (response.status !== 200) throw new Error(`token request failed: ${response.status} ${response.text}`)
    return response.body.access_token as string
  })
