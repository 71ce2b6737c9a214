/**
 * At start, the proxy services whose upstream is outside the upstream policy (`UpstreamPolicy`):
 * services written before the policy existed (not approved by an admin), or whose origin a changed
 * `UPSTREAM_ALLOWED_ORIGINS` or profile list no longer allows. Their calls answer 502; nothing is
 * silently allowed or silently broken: one warning per profile says which services and how to fix
 * them. Read in the background, a page at a time, so a start never waits for it.
 */
import { Clock, Effect, Layer } from "effect"
import { AppConfig } from "../../config/AppConfig.js"
import { upstreamStanding } from "../../domain/UpstreamPolicy.js"
import type { ServiceAddress } from "../../domain/ServiceAddress.js"
import { CatalogueQueries } from "../../catalogue/CatalogueQueries.js"
import type { LiveService } from "../../catalogue/CatalogueQueries.js"

const PAGE = 500

/** `environment/uuid (why)` of each service outside the policy, by profile. */
export const upstreamsOutsidePolicy = Effect.gen(function*() {
  const queries = yield* CatalogueQueries
  const { upstreamAllowedOrigins } = yield* AppConfig
  const outside = new Map<string, Array<string>>()
  let after: ServiceAddress | undefined = undefined
  while (true) {
    const page: ReadonlyArray<LiveService> = yield* queries.liveServices(undefined, after, PAGE)
    for (const service of page) {
      if (service.handler.type !== "proxy") continue
      const verdict = upstreamStanding(service.handler.url, service.upstreamApproved, {
        deployment: upstreamAllowedOrigins,
        profile: service.upstreamOrigins
      })
      if (verdict._tag !== "Refused") continue
      const listed = outside.get(service.profile) ?? []
      listed.push(`${service.environment}/${service.uuid} (${verdict.reason})`)
      outside.set(service.profile, listed)
    }
    if (page.length < PAGE) return outside
    after = page[page.length - 1]
    yield* Effect.sleep("1 millis")
  }
})

/** The warning for one profile's services outside the policy. */
export const outsidePolicyWarning = (profile: string, services: ReadonlyArray<string>) =>
  `Profile ${profile}: ${services.length} proxy service${services.length === 1 ? "" : "s"} with an upstream outside ` +
  "the upstream policy, answering 502 bad_gateway until an admin token saves the service again (approving its URL) or " +
  `allows its origin (UPSTREAM_ALLOWED_ORIGINS, or the profile's upstream_origins): ${services.join("; ")}`

export const layer = Layer.scopedDiscard(
  Effect.forkScoped(
    upstreamsOutsidePolicy.pipe(
      Effect.flatMap((outside) =>
        Effect.forEach(outside, ([profile, services]) => Effect.logWarning(outsidePolicyWarning(profile, services)), { discard: true })
      ),
      Effect.catchAll(() => Effect.logWarning("Could not check the proxy services against the upstream policy: storage did not answer")),
      Effect.catchAllDefect((defect) => Effect.logWarning("The upstream policy check failed", defect)),
      Effect.withClock(Clock.make())
    )
  )
)
