/**
 * The catalogue's writes: what the admin API, the credential manager, the revocation endpoint and
 * the expiry sweep change. Each records its audit event with the change, and evicts from every
 * instance's cache what it changed before it returns (`CredentialRepo` says how each behaves).
 */
import { Context } from "effect"
import type { CachedCatalogue } from "./CredentialRepo.js"

export type CatalogueWritesShape = Pick<
  CachedCatalogue,
  | "putProfile"
  | "deleteProfile"
  | "putEnvironment"
  | "deleteEnvironment"
  | "putService"
  | "deleteService"
  | "applyCredentialChanges"
  | "revokeToken"
  | "setIntrospectProfiles"
  | "recordExpiries"
  | "dropCached"
>

export class CatalogueWrites extends Context.Tag("service-auth/CatalogueWrites")<CatalogueWrites, CatalogueWritesShape>() {}
