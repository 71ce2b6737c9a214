/**
 * The application as layers: the HTTP API and the services it stands on, and the whole server
 * (`layerServer`) that `main.ts` launches and an embedding program may launch itself (`index.ts`).
 * Storage, keys and the digest key are parameters, so `main.ts` passes the live ones and tests pass
 * in-memory storage and fixed keys (see `testing.ts`).
 *
 * Naming, across the code: a module's live layer is `layer`, its deterministic one `layerTest`, other
 * variants say what they are (`layerMemory`, `layerSql`, `layerEmbedded`); a module with several
 * live layers names each (`layerProfiles`, `layerDomain`).
 */
import { HttpApiBuilder, HttpMiddleware, HttpRouter } from "@effect/platform"
import { Layer, type Redacted } from "effect"
import { Api } from "./api/Api.js"
import { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
import { AdminFailureLimiter, AuthFailureLimiter } from "./auth/AuthFailureLimiter.js"
import { CallLastUse } from "./auth/CallLastUse.js"
import { ClientAssertions } from "./auth/ClientAssertion.js"
import { ClientCredentialsGrant } from "./auth/ClientCredentialsGrant.js"
import { ClientSecrets } from "./auth/ClientSecrets.js"
import * as CredentialExpiry from "./auth/CredentialExpiry.js"
import { CredentialManager } from "./auth/CredentialManager.js"
import { KeyEncryption } from "./auth/KeyEncryption.js"
import { KeyService } from "./auth/KeyService.js"
import { TokenService } from "./auth/TokenService.js"
import { ServiceCallGate } from "./gateway/ServiceCallGate.js"
import { RateLimits } from "./gateway/RateLimits.js"
import { ServiceHandlers } from "./gateway/ServiceHandlers.js"
import { UpstreamGateway } from "./gateway/UpstreamGateway.js"
import * as UpstreamPolicyReport from "./gateway/UpstreamPolicyReport.js"
import { adminChallenge } from "./http/AdminChallenge.js"
import * as AdminHttp from "./http/AdminHttp.js"
import * as CredentialIntrospectionHttp from "./http/CredentialIntrospectionHttp.js"
import * as AdminKeysHttp from "./http/AdminKeysHttp.js"
import * as AdminTokensHttp from "./http/AdminTokensHttp.js"
import * as DiscoveryHttp from "./http/DiscoveryHttp.js"
import * as MetricsHttp from "./http/MetricsHttp.js"
import { RequestIds } from "./http/RequestId.js"
import { ServedOpenApi } from "./http/ServedOpenApi.js"
import { requestLog } from "./http/RequestLog.js"
import { requestMetrics } from "./http/RequestMetrics.js"
import { requestSpan } from "./http/RequestSpan.js"
import * as FastLane from "./http/FastLane.js"
import { HotEndpoints } from "./http/HotEndpoints.js"
import type { EarlyPort } from "./http/EarlyPort.js"
import * as NodeServer from "./http/NodeServer.js"
import { closeAfterPayloadTooLarge, layerJsonErrors } from "./http/ServerErrors.js"
import * as ServiceHttp from "./http/ServiceHttp.js"
import * as TokenHttp from "./http/TokenHttp.js"
import * as WebHttp from "./http/WebHttp.js"
import type { AdminTokenStore } from "./storage/AdminTokenStore.js"
import type { AuditTrail } from "./storage/AuditTrail.js"
import type { CatalogueServices } from "./storage/Storage.js"
import type { FailureCounts } from "./storage/FailureCounts.js"
import { SeenJtis } from "./storage/SeenJtis.js"
import type { ServerKeyStore } from "./keys/ServerKeyStore.js"
import type { SigningKeyStore } from "./keys/SigningKeyStore.js"
import * as Storage from "./storage/Storage.js"

/**
 * Domain services over the given key and digest-key layers. Needs AppConfig, the catalogue's services, and
 * whatever the key layers need (the live ones: ServerKeyStore, SigningKeyStore, KeyEncryption).
 */
export const makeDomainLayer = <RK, RS, EK = never, RH = never>(options: {
  readonly keys: Layer.Layer<KeyService, EK, RK>
  readonly secrets: Layer.Layer<ClientSecrets, never, RS>
  /** Handlers registered in code (`ServiceHandlers.layerWith`); echo and proxy by default. */
  readonly handlers?: Layer.Layer<ServiceHandlers, never, RH>
}) =>
  HotEndpoints.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      ClientCredentialsGrant.layer,
      CredentialManager.layer,
      ServiceCallGate.layer,
      CredentialExpiry.layer,
      UpstreamPolicyReport.layer
    )),
    Layer.provideMerge(
      Layer.mergeAll(
        TokenService.layer,
        AuthFailureLimiter.layer,
        AdminFailureLimiter.layer,
        ClientAssertions.layer,
        CallLastUse.layer,
        RateLimits.layer,
        UpstreamGateway.layer,
        options.handlers ?? ServiceHandlers.layer
      )
    ),
    Layer.provideMerge(Layer.mergeAll(options.keys, options.secrets, SeenJtis.layer, RequestIds.layer, ServedOpenApi.layer))
  )

/**
 * The live domain: stored (or SIGNING_KEY_FILE) keys, the stored digest key, both sealed at rest as
 * configured, and `handlers` registered in code (echo and proxy by default).
 */
export const layerDomainWith = <RH = never>(handlers?: Layer.Layer<ServiceHandlers, never, RH>) =>
  makeDomainLayer({ keys: KeyService.layer, secrets: ClientSecrets.layer, ...(handlers === undefined ? {} : { handlers }) })
    .pipe(Layer.provide(KeyEncryption.layer))

/** The live domain with the built-in handlers. */
export const layerDomain = layerDomainWith()
export const layerDomainTest = makeDomainLayer({ keys: KeyService.layerTest, secrets: ClientSecrets.layerTest })

/** Every endpoint of `Api`, implemented. */
export const layerHttpApi = Layer.merge(
  HttpApiBuilder.api(Api).pipe(
    Layer.provide([
      TokenHttp.layer,
      ServiceHttp.layer,
      AdminHttp.layerProfiles,
      AdminHttp.layerServices,
      CredentialIntrospectionHttp.layer,
      AdminHttp.layerAudit,
      AdminKeysHttp.layer,
      AdminTokensHttp.layerTokens,
      AdminTokensHttp.layerSession,
      DiscoveryHttp.layer,
      WebHttp.layer,
      MetricsHttp.layer
    ])
  ),
  layerJsonErrors
)

/**
 * The API as an HTTP app on whatever `HttpServer` is provided. Path parameters may be up to 1 KiB
 * (the router's default of 100 would turn a long name into a route miss instead of a 400 that says
 * what is wrong with it).
 */
export const layerServe = HttpApiBuilder.serve((app) =>
  requestSpan(requestMetrics(requestLog(adminChallenge(closeAfterPayloadTooLarge(app)))))
).pipe(
  Layer.provide(layerHttpApi),
  Layer.provide(HttpRouter.setRouterConfig({ maxParamLength: 1024 }))
)

/** For a launched server: the platform's request span records the query string and every header; `requestSpan` is ours. */
export const withoutPlatformRequestSpans = HttpMiddleware.withTracerDisabledWhenEffect(() => true)

/** What a server's storage layer provides: the repositories every storage of `storage/Storage.ts` holds. */
export type StorageServices =
  | CatalogueServices
  | AuditTrail
  | AdminTokenStore
  | ServerKeyStore
  | SigningKeyStore
  | FailureCounts

/** Where an embedding program keeps its data: in memory, in an embedded database, or in PostgreSQL. */
export type StorageChoice =
  | { readonly kind: "memory" }
  /** `dataDir` undefined: an embedded database in memory. */
  | { readonly kind: "embedded"; readonly dataDir: string | undefined }
  | { readonly kind: "postgres"; readonly url: Redacted.Redacted<string> }

/**
 * Every storage layer a server needs, for the storage chosen: the catalogue's narrow services
 * (`CatalogueLookup`, `CatalogueQueries`, `CatalogueWrites`, `LastUse`), the audit trail, admin
 * tokens, keys and failure counts, migrated where there is a database. A program swaps its storage
 * here, in one line (`ServerOptions.storage`).
 */
export const storageLayer = (
  choice: StorageChoice
): Layer.Layer<StorageServices, Layer.Layer.Error<ReturnType<typeof Storage.layerPostgres>>> => {
  switch (choice.kind) {
    case "memory":
      return Storage.layerMemory
    case "embedded":
      return Storage.layerEmbedded(choice.dataDir)
    case "postgres":
      return Storage.layerPostgres(choice.url)
  }
}

/** What an embedding program chooses; everything else follows from `config`. */
export interface ServerOptions<ES = never, RH = never> {
  /** The settings: `AppConfig.fromEnv` reads them as `npm start` does; a program may build its own. */
  readonly config: AppConfigShape
  /** By default what `config` names: PostgreSQL with DATABASE_URL, otherwise the embedded database. */
  readonly storage?: Layer.Layer<StorageServices, ES, AppConfig>
  /** Handlers registered in code (`ServiceHandlers.layerWith`); echo and proxy by default. */
  readonly handlers?: Layer.Layer<ServiceHandlers, never, RH>
  /** A port opened before the storage (`openEarlyPort`, as `npm start` does), which the server takes over. */
  readonly earlyPort?: EarlyPort
}

/**
 * The server `npm start` runs: storage opened (and migrated), the domain on it, the API, and the
 * port, which opens last (`NodeServer`, with the fast lane in front). `Layer.launch` it; it drains
 * and closes its storage when interrupted.
 */
export const layerServer = <ES = never, RH = never>(options: ServerOptions<ES, RH>) => {
  const storage: Layer.Layer<StorageServices, ES | Layer.Layer.Error<typeof Storage.layerFromConfig>, AppConfig> =
    options.storage ?? Storage.layerFromConfig
  return layerServe.pipe(
    Layer.provide(NodeServer.layer(options.config, options.earlyPort).pipe(Layer.provide(FastLane.layer))),
    Layer.provide(layerDomainWith(options.handlers)),
    Layer.provide(storage),
    Layer.provide(Layer.succeed(AppConfig, options.config))
  )
}
