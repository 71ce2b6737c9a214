/**
 * The public embedding API: what a program that runs service-auth inside itself imports. The whole
 * server (`layerServer`, with its options) to launch as `npm start` does; or its parts: the domain
 * layer, the HTTP API as a layer, the storage layers (each flow's narrow service: `CatalogueLookup`,
 * `CatalogueQueries`, `CatalogueWrites`, `LastUse`...; all of them for one storage with
 * `storageLayer`) and the configuration. Handlers registered in
 * code (`ServiceHandlers.layerWith`, keyed by the service's full address `profile/environment/uuid`)
 * take that one service's place. The admin API's typed client (`AdminClient`, `HttpApiClient` over
 * `Api`, the one the CLI uses) drives a server from another program. Tests import `testing.ts`.
 *
 *   const program = Effect.flatMap(AppConfig.fromEnv, (config) => Layer.launch(layerServer({ config })))
 */
export { Api } from "./server/Api.js"
export {
  layerDomain,
  layerDomainWith,
  layerHttpApi,
  layerServe,
  layerServer,
  makeDomainLayer,
  type ServerOptions,
  type StorageChoice,
  storageLayer,
  type StorageServices
} from "./AppLayer.js"
export { ClientSecrets } from "./catalogue/ClientSecrets.js"
export { AdminClient } from "./cli/AdminClient.js"
export type { AdminClientShape, EnvironmentAddress, ServiceAddress } from "./cli/AdminClientShape.js"
export { type AdminCallError, AdminApiError, ServerUnreachable, UnexpectedAnswer } from "./cli/AdminClientErrors.js"
export { InvalidServerUrl } from "./cli/ServerAddress.js"
export { SERVICE_VERSION } from "./config/Version.js"
export { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "./domain/Identifiers.js"
export { KeyEncryption } from "./keys/KeyEncryption.js"
export { KeyService } from "./keys/KeyService.js"
export { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
export { StartupError } from "./config/StartupError.js"
export { BadGateway } from "./domain/Errors.js"
export { type JsonObject, type ServiceCall, type ServiceHandler, ServiceHandlers } from "./service-call/ServiceHandlers.js"
export { AdminTokenStore } from "./admin/AdminTokenStore.js"
export { AuditTrail } from "./storage/AuditTrail.js"
export { CatalogueLookup } from "./catalogue/CatalogueLookup.js"
export { CatalogueQueries } from "./catalogue/CatalogueQueries.js"
export { CatalogueWrites } from "./catalogue/CatalogueWrites.js"
export { LastUse } from "./catalogue/LastUse.js"
export * as Storage from "./storage/Storage.js"
