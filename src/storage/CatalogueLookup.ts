/**
 * The hot read, as the token endpoint and the service call need it (fosite gives each flow the
 * storage interface it needs): what a service is and whether a credential of it is live. The
 * synchronous lookups answer from the cached catalogue, undefined when it does not hold the answer;
 * then the `find…` read is made in Effect (one indexed read, whose answer the cache keeps).
 */
import { Context } from "effect"
import type { CataloguePeek, CredentialRepoShape } from "./CredentialRepo.js"

export interface CatalogueLookupShape extends CataloguePeek {
  readonly findTokenTarget: CredentialRepoShape["findTokenTarget"]
  readonly findServiceRoute: CredentialRepoShape["findServiceRoute"]
}

export class CatalogueLookup extends Context.Tag("service-auth/CatalogueLookup")<CatalogueLookup, CatalogueLookupShape>() {}
