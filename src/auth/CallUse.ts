/**
 * Service calls count as uses of a credential: a call let through with a token notes the token's
 * credential (`noteCall`), so that `last_used_at` answers "is anyone still using it" for a client
 * that caches its token for the whole hour, as OAuth client libraries do, and not only "when did it
 * last ask for a token". Both entries of the service call reach it through `decideServiceCall`.
 *
 * The hot path pays one map read per call: a credential is noted at most once per
 * `LAST_USE_RESOLUTION`, and the record itself is the repository's synchronous one (`recordUseSync`,
 * written in batches by `LastUsedWrites`); without it (spans around every operation) the use is
 * recorded through `recordUse`, forked. The table is bounded: when full, the credential
 * noted longest ago is forgotten, which costs at most one extra note; and a note leaves by itself
 * once a resolution old (it would not spare a note any more).
 */
import { Context, Duration, Effect, Layer, Runtime } from "effect"
import { ExpiringEntries, sweepPeriodically } from "../domain/ExpiringEntries.js"
import type { ClientId } from "../domain/Identifiers.js"
import { LAST_USE_RESOLUTION } from "../domain/LastUse.js"
import { UsageRecord } from "../storage/UsageRecord.js"

/**
 * How many credentials the last-noted times are kept for: about 150 bytes each with the client
 * id's string (docs/performance.md), 15 MB at most.
 */
export const MAX_TRACKED_CREDENTIALS = 100_000
const RESOLUTION_MILLIS = Duration.toMillis(LAST_USE_RESOLUTION)

export interface CallUseShape {
  /** A service call let through with a token of `clientId` at `nowMillis`: noted at most once a minute. */
  readonly noteCall: (clientId: ClientId, nowMillis: number) => void
  /** Credentials noted now (for tests of the bound). */
  readonly tracked: () => number
}

export class CallUse extends Context.Tag("service-auth/CallUse")<CallUse, CallUseShape>() {
  static readonly layer = Layer.scoped(
    CallUse,
    Effect.gen(function*() {
      const usage = yield* UsageRecord
      const runtime = yield* Effect.runtime<never>()
      const recordUse: (clientId: ClientId, at: Date) => void = usage.recordUseSync ??
        ((clientId, at) => void Runtime.runFork(runtime)(Effect.ignore(usage.recordUse(clientId, at))))
      // A credential present is one noted less than a resolution ago: its call needs no note.
      const noted = new ExpiringEntries<ClientId, true>(MAX_TRACKED_CREDENTIALS)
      yield* sweepPeriodically([noted])
      return CallUse.of({
        noteCall: (clientId, nowMillis) => {
          if (noted.get(clientId, nowMillis) !== undefined) return
          noted.set(clientId, true, nowMillis + RESOLUTION_MILLIS, nowMillis)
          recordUse(clientId, new Date(nowMillis))
        },
        tracked: () => noted.size
      })
    })
  )
}
