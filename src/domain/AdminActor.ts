/**
 * Who makes an admin change: the name of the admin token presented (`admin` for ADMIN_TOKEN, the
 * name given in ADMIN_TOKENS otherwise) and the address the request came from (the TCP peer).
 * Provided to the admin handlers by the `AdminAuth` middleware, and passed down explicitly to the
 * repository, which records it in the audit trail with the change.
 */
import { Context } from "effect"

export interface AdminActorShape {
  readonly name: string
  readonly source: string
}

export class AdminActor extends Context.Tag("service-auth/AdminActor")<AdminActor, AdminActorShape>() {}
