/**
 * Service calls count as uses of a credential: a call let through with a token records the last use
 * of the token's credential (`recordCallUse`), so that `last_used_at` answers "is anyone still using it" for a client
 * that caches its token for the whole hour, as OAuth client libraries do, and not only "when did it
 * last ask for a token". Both entries of the service call reach it through `decideServiceCall`.
 *
 * The hot path pays one map read per call: a credential is recorded at most once per
 * `LAST_USE_RESOLUTION`, and the record itself is storage's synchronous one (`LastUse.recordUseSync`,
 * written in batches); where traces are exported the use is recorded through `recordUse`, forked,
 * in its span. The table is bounded: when full, the credential recorded longest ago is forgotten,
 * which costs at most one extra record; and an entry leaves by itself once a resolution old (it
 * would not spare a record any more).
 */
import { Context, Duration, Effect, Layer, Runtime } from "effect"
import { ExpiringEntries, sweepPeriodically } from "../domain/ExpiringEntries.js"
import type { ClientId } from "../domain/Identifiers.js"
import { LAST_USE_RESOLUTION } from "../domain/LastUse.js"
import { tracerEnabled } from "../observability/Tracing.js"
import { LastUse } from "./LastUse.js"

/**
 * How many credentials the last recorded times are kept for: about 150 bytes each with the client
 * id's string (docs/performance.md), 15 MB at most.
 */
export const MAX_TRACKED_CREDENTIALS = 100_000
const RESOLUTION_MILLIS = Duration.toMillis(LAST_USE_RESOLUTION)

export interface CallLastUseShape {
  /** A service call let through with a token of `clientId` at `nowMillis`: recorded at most once a minute. */
  readonly recordCallUse: (clientId: ClientId, nowMillis: number) => void
  /** Credentials tracked now (for tests of the bound). */
  readonly tracked: () => number
}

export class CallLastUse extends Context.Tag("service-auth/CallLastUse")<CallLastUse, CallLastUseShape>() {
  static readonly layer = Layer.scoped(
    CallLastUse,
    Effect.gen(function*() {
      const lastUse = yield* LastUse
      const runtime = yield* Effect.runtime<never>()
      const recordUse: (clientId: ClientId, at: Date) => void = (yield* tracerEnabled)
        ? (clientId, at) => void Runtime.runFork(runtime)(Effect.ignore(lastUse.recordUse(clientId, at)))
        : lastUse.recordUseSync
      // A credential present is one recorded less than a resolution ago: its call needs no record.
      const recorded = new ExpiringEntries<ClientId, true>(MAX_TRACKED_CREDENTIALS)
      yield* sweepPeriodically([recorded])
      return CallLastUse.of({
        recordCallUse: (clientId, nowMillis) => {
          if (recorded.get(clientId, nowMillis) !== undefined) return
          recorded.set(clientId, true, nowMillis + RESOLUTION_MILLIS, nowMillis)
          recordUse(clientId, new Date(nowMillis))
        },
        tracked: () => recorded.size
      })
    })
  )
}
