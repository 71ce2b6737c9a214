/**
 * Who makes an admin change: the name of the admin token presented (`admin` for ADMIN_TOKEN, the
 * name given in ADMIN_TOKENS or in `POST /admin/tokens` otherwise) and the address the request came
 * from (the TCP peer). Provided to the admin handlers by the `AdminAuth` middleware with the token's
 * role and profiles (`AdminCaller`), and passed down explicitly to the repository, which records it
 * in the audit trail with the change.
 */
import { Context } from "effect"
import type { AdminScope } from "./AdminRoles.js"

export interface AdminActorShape {
  readonly name: string
  readonly source: string
}

/** An authenticated admin request: who, from where, and what its token may do. */
export interface AdminCaller extends AdminActorShape, AdminScope {}

export class AdminActor extends Context.Tag("service-auth/AdminActor")<AdminActor, AdminCaller>() {}
