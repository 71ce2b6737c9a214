/**
 * What `GET /metrics` counts, as Effect metrics: token requests by result, service calls by status,
 * and request durations by route template. Both the HttpApi app (`RequestMetrics`) and the fast
 * lane, which answers without the app, record through these functions, so every answered request
 * is counted once, whichever path answered it.
 *
 * Labels only ever hold values from closed sets (a result code, a status, a route template of the
 * API), never anything a client sent: no secret, token or raw path can become a label. The label
 * arrays are made once per value and reused, because Effect caches a metric's hook per label array
 * (by identity): the hot paths then cost a map lookup and an addition.
 */
import { FiberRef, Metric, MetricBoundaries, MetricLabel } from "effect"

export const tokenRequests = Metric.counter("service_auth_token_requests_total", {
  description: "Requests to POST /oauth/token by result: issued, or the OAuth error code of the answer."
})

export const serviceCalls = Metric.counter("service_auth_service_calls_total", {
  description: "Service calls (POST /service/{profile}/{environment}/json/{uuid}) by HTTP status of the answer."
})

export const requestDuration = Metric.histogram(
  "service_auth_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "Time from a request's arrival to its answer, by route template of the API (unmatched for any other path)."
)

export const upstreamCalls = Metric.counter("service_auth_upstream_calls_total", {
  description: "Calls of proxy services' upstreams by outcome: ok (a 2xx JSON object), passed_on (400/404/409/422/429 " +
    "answered as the upstream's), bad_gateway (502), open (refused by an open circuit breaker), saturated (refused: " +
    "UPSTREAM_MAX_CONCURRENCY calls in flight), refused (502: the upstream address is outside the upstream policy)."
})

export const openBreakers = Metric.gauge("service_auth_upstream_open_breakers", {
  description: "Proxy services whose circuit breaker is open on this instance (their upstream failed 5 times in a row)."
})

export const UPSTREAM_OUTCOMES = ["ok", "passed_on", "bad_gateway", "open", "saturated", "refused"] as const
export type UpstreamOutcome = typeof UPSTREAM_OUTCOMES[number]

/** The error codes a token answer can carry (docs/contract.md §1), plus what the server itself answers. */
const TOKEN_RESULTS = [
  "issued",
  "invalid_request",
  "unsupported_grant_type",
  "invalid_target",
  "invalid_client",
  "temporarily_unavailable",
  "server_error"
] as const
export type TokenResult = typeof TOKEN_RESULTS[number]

/** The route label of a path that is none of the API's routes. */
export const UNMATCHED_ROUTE = "unmatched"

const labelCache = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const labels = (key: string, value: string): ReadonlyArray<MetricLabel.MetricLabel> => {
  const cacheKey = `${key}\u0000${value}`
  let cached = labelCache.get(cacheKey)
  if (cached === undefined) {
    cached = [MetricLabel.make(key, value)]
    labelCache.set(cacheKey, cached)
  }
  return cached
}

/** `result` as a token request's label: a code of the closed set, or `other` for anything else. */
export const tokenResultOf = (code: string | undefined): TokenResult | "other" =>
  TOKEN_RESULTS.includes(code as TokenResult) ? code as TokenResult : "other"

export const recordTokenRequest = (result: TokenResult | "other") => tokenRequests.unsafeUpdate(1, labels("result", result))

/**
 * The token decision's own result, noted by the HttpApi handler for the request's metrics
 * (`RequestMetrics`), which runs in the same fiber: the label comes from the decision, as on the
 * fast lane, not from the answer read back.
 */
export const decidedTokenResult = FiberRef.unsafeMake<TokenResult | "other" | undefined>(undefined)

export const recordServiceCall = (status: number) => serviceCalls.unsafeUpdate(1, labels("status", String(status)))

export const recordUpstreamCall = (outcome: UpstreamOutcome) => upstreamCalls.unsafeUpdate(1, labels("outcome", outcome))

export const recordOpenBreakers = (open: number) => openBreakers.unsafeUpdate(open, [])

/** `route` must be a template from `Routes.routeTemplate` or `UNMATCHED_ROUTE`. */
export const recordDuration = (route: string, seconds: number) =>
  requestDuration.unsafeUpdate(seconds, labels("route", route))

/**
 * The series a scraper should see at zero before the first request, so that a rate over the first
 * one is right: every token result, and the statuses a service call answers most.
 */
export const registerKnownSeries = () => {
  for (const result of TOKEN_RESULTS) tokenRequests.unsafeValue(labels("result", result))
  for (const status of [200, 400, 401, 403, 404, 413, 502, 503]) serviceCalls.unsafeValue(labels("status", String(status)))
  for (const outcome of UPSTREAM_OUTCOMES) upstreamCalls.unsafeValue(labels("outcome", outcome))
  openBreakers.unsafeValue([])
}
