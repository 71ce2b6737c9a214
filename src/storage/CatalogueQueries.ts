/**
 * The catalogue's other reads, none of them hot: the admin API's documents, the metrics' counts,
 * a profile's credential policy and upstream origins, the live services (the start-up report of
 * upstreams outside the policy), a credential found by its client id alone (the revocation
 * endpoint), and whether storage answers at all (`/readyz`).
 */
import { Context } from "effect"
import type { CredentialRepoShape } from "./CredentialRepo.js"

export type CatalogueQueriesShape = Pick<
  CredentialRepoShape,
  | "ping"
  | "countCatalogue"
  | "countExpiring"
  | "credentialLifetime"
  | "upstreamOrigins"
  | "liveServices"
  | "listProfiles"
  | "getProfile"
  | "getService"
  | "findClientCredential"
>

export class CatalogueQueries extends Context.Tag("service-auth/CatalogueQueries")<CatalogueQueries, CatalogueQueriesShape>() {}
