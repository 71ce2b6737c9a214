/**
 * A credential's last use (`last_used_at`): recorded by a token request whose credential's record
 * is a minute old, and by a service call let through with one of its tokens (`CallUse`).
 */
import { Context } from "effect"
import type { ClientId } from "../domain/Identifiers.js"
import type { CredentialRepoShape } from "./CredentialRepo.js"

export interface UsageRecordShape {
  /** Records the use at `now`: the later of it and what was recorded wins, whatever the order. */
  readonly recordUse: CredentialRepoShape["recordUse"]
  /**
   * `recordUse` done synchronously, for the hot paths (an Effect per use cost about a fifth of the
   * event loop). Undefined while traces are exported: each use is then recorded by `recordUse`, in
   * its span.
   */
  readonly recordUseSync: ((clientId: ClientId, now: Date) => void) | undefined
}

export class UsageRecord extends Context.Tag("service-auth/UsageRecord")<UsageRecord, UsageRecordShape>() {}
