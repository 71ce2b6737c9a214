/**
 * The application as layers: the HTTP API and the services it stands on, and the whole server
 * (`layerServer`) that `ServerMain.ts` launches and an embedding program may launch itself (`index.ts`).
 * Storage, keys and the digest key are parameters, so `ServerMain.ts` passes the live ones and tests pass
 * in-memory storage and fixed keys (see `testing.ts`).
 *
 * Naming, across the code: a module's live layer is `layer`, its deterministic one `layerTest`, other
 * variants say what they are (`layerMemory`, `layerSql`, `layerEmbedded`); a module with several
 * live layers names each (`layerProfiles`, `layerDomain`).
 */
import { HttpApiBuilder, HttpMiddleware, HttpRouter } from "@effect/platform"
import { Layer, type Redacted } from "effect"
import { Api } from "./server/Api.js"
import { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
import { AdminFailureLimiter, AuthFailureLimiter } from "./token/AuthFailureLimiter.js"
import { CallLastUse } from "./catalogue/CallLastUse.js"
import { ClientAssertions } from "./token/ClientAssertion.js"
import { FederatedAssertions } from "./federation/FederatedAssertions.js"
import { IssuerKeys } from "./federation/IssuerKeys.js"
import { ClientCredentialsGrant } from "./token/ClientCredentialsGrant.js"
import { ClientSecrets } from "./catalogue/ClientSecrets.js"
import * as CredentialExpiry from "./catalogue/CredentialExpiry.js"
import { CredentialManager } from "./catalogue/CredentialManager.js"
import { KeyEncryption } from "./keys/KeyEncryption.js"
import { KeyService } from "./keys/KeyService.js"
import { TokenService } from "./token/TokenService.js"
import { ServiceCallGate } from "./service-call/ServiceCallGate.js"
import { RateLimits } from "./service-call/RateLimits.js"
import { ServiceHandlers } from "./service-call/ServiceHandlers.js"
import { UpstreamGateway } from "./service-call/proxy/UpstreamGateway.js"
import * as UpstreamPolicyReport from "./service-call/proxy/UpstreamPolicyReport.js"
import { adminChallenge } from "./admin/AdminChallenge.js"
import * as AdminHttp from "./admin/AdminHttp.js"
import * as CredentialIntrospectionHttp from "./admin/CredentialIntrospectionHttp.js"
import * as AdminKeysHttp from "./admin/AdminKeysHttp.js"
import * as AdminTokensHttp from "./admin/AdminTokensHttp.js"
import * as TrustedIssuersHttp from "./federation/TrustedIssuersHttp.js"
import * as DiscoveryHttp from "./server/DiscoveryHttp.js"
import * as MetricsHttp from "./observability/MetricsHttp.js"
import { RequestIds } from "./server/RequestId.js"
import { ServedOpenApi } from "./server/ServedOpenApi.js"
import { requestLog } from "./server/RequestLog.js"
import { requestMetrics } from "./server/RequestMetrics.js"
import { requestSpan } from "./server/RequestSpan.js"
import * as FastLane from "./server/FastLane.js"
import { HotEndpoints } from "./server/HotEndpoints.js"
import type { EarlyPort } from "./server/EarlyPort.js"
import * as NodeServer from "./server/NodeServer.js"
import { closeAfterPayloadTooLarge, layerJsonErrors } from "./server/ServerErrors.js"
import * as ServiceHttp from "./service-call/ServiceHttp.js"
import * as TokenHttp from "./token/TokenHttp.js"
import * as WebHttp from "./web/WebHttp.js"
import type { AdminTokenStore } from "./admin/AdminTokenStore.js"
import type { TrustedIssuerStore } from "./federation/TrustedIssuerStore.js"
import type { AuditTrail } from "./storage/AuditTrail.js"
import type { CatalogueServices } from "./storage/Storage.js"
import type { FailureCounts } from "./token/FailureCounts.js"
import { SeenJtis } from "./token/SeenJtis.js"
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
    Layer.provideMerge(
      Layer.mergeAll(
        options.keys,
        options.secrets,
        SeenJtis.layer,
        RequestIds.layer,
        ServedOpenApi.layer,
        FederatedAssertions.layer.pipe(Layer.provide(IssuerKeys.layer))
      )
    )
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
      TrustedIssuersHttp.layer,
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
  | TrustedIssuerStore
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
  const storage: Layer.Layer<StorageServices, ES | Layer.Layer.Error<typeof Storage.layerFromConfig>, AppConfig> = options.storage ??
    Storage.layerFromConfig
  return layerServe.pipe(
    Layer.provide(NodeServer.layer(options.config, options.earlyPort).pipe(Layer.provide(FastLane.layer))),
    Layer.provide(layerDomainWith(options.handlers)),
    Layer.provide(storage),
    Layer.provide(Layer.succeed(AppConfig, options.config))
  )
}
