/**
 * Service calls count as uses of a credential: a call let through with a token notes the token's
 * credential (`noteCall`), so that `last_used_at` answers "is anyone still using it" for a client
 * that caches its token for the whole hour, as OAuth client libraries do, and not only "when did it
 * last ask for a token". Both entries of the service call reach it through `decideServiceCall`.
 *
 * The hot path pays one map read per call: a credential is noted at most once per
 * `LAST_USE_RESOLUTION`, and the record itself is the repository's synchronous one (`recordUseSync`,
 * written in batches by `LastUsedWrites`); without it (spans around every operation) the use is
 * recorded through `recordUse`, forked. The map is bounded: when full, the credential
 * noted longest ago is forgotten, which costs at most one extra note.
 */
import { Context, Effect, Layer, Runtime } from "effect"
import type { ClientId } from "../domain/Identifiers.js"
import { lastUseIsStale } from "../domain/LastUse.js"
import { UsageRecord } from "../storage/UsageRecord.js"

/** How many credentials the last-noted times are kept for (one entry each, a few dozen bytes). */
const MAX_TRACKED_CREDENTIALS = 100_000

export interface CallUseShape {
  /** A service call let through with a token of `clientId` at `nowMillis`: noted at most once a minute. */
  readonly noteCall: (clientId: ClientId, nowMillis: number) => void
}

export class CallUse extends Context.Tag("service-auth/CallUse")<CallUse, CallUseShape>() {
  static readonly layer = Layer.effect(
    CallUse,
    Effect.gen(function*() {
      const usage = yield* UsageRecord
      const runtime = yield* Effect.runtime<never>()
      const recordUse: (clientId: ClientId, at: Date) => void = usage.recordUseSync ??
        ((clientId, at) => void Runtime.runFork(runtime)(Effect.ignore(usage.recordUse(clientId, at))))
      // Insertion order is the order of the last notes: the first key is the one noted longest ago.
      const notedAt = new Map<ClientId, number>()
      return CallUse.of({
        noteCall: (clientId, nowMillis) => {
          if (!lastUseIsStale(notedAt.get(clientId), nowMillis)) return
          notedAt.delete(clientId)
          if (notedAt.size >= MAX_TRACKED_CREDENTIALS) notedAt.delete(notedAt.keys().next().value!)
          notedAt.set(clientId, nowMillis)
          recordUse(clientId, new Date(nowMillis))
        }
      })
    })
  )
}
