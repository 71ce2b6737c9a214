/**
 * What `GET /metrics` counts, as Effect metrics: token requests by result, service calls by status,
 * and request durations by route template. Both the HttpApi app (`RequestMetrics`) and the fast
 * lane, which answers without the app, record through these functions, so every answered request
 * is counted once, whichever path answered it.
 *
 * Labels only ever hold values from closed sets (a result code, a status, a route template of the
 * API), never anything a client sent: no secret, token or raw path can become a label. The label
 * arrays are made once per value, when the module loads, and reused, because Effect caches a
 * metric's hook per label array (by identity): the hot paths then cost a map lookup and an
 * addition, and the series are bounded by the sets (`LABEL_SET_COUNTS`).
 */
import { FiberRef, Metric, MetricBoundaries, MetricLabel } from "effect"
import { ROUTE_TEMPLATES } from "../server/Routes.js"

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

/**
 * The label arrays, made once for every value of each closed set, so the tables cannot grow after
 * the module has loaded (and no value a client sent can reach a label): a value outside its set is
 * counted under `other` (a token result, an outcome), the status `other` (not an HTTP status), or
 * `unmatched` (a route that is not the API's).
 */
const labelTable = (key: string, values: ReadonlyArray<string>): ReadonlyMap<string, ReadonlyArray<MetricLabel.MetricLabel>> =>
  new Map(values.map((value) => [value, [MetricLabel.make(key, value)]]))

const STATUSES = Array.from({ length: 500 }, (_, i) => String(100 + i))
const resultLabels = labelTable("result", [...TOKEN_RESULTS, "other"])
const statusLabels = labelTable("status", [...STATUSES, "other"])
const outcomeLabels = labelTable("outcome", [...UPSTREAM_OUTCOMES, "other"])
const routeLabels = labelTable("route", [...ROUTE_TEMPLATES, UNMATCHED_ROUTE])

const labelsOf = (
  table: ReadonlyMap<string, ReadonlyArray<MetricLabel.MetricLabel>>,
  value: string,
  fallback: string
): ReadonlyArray<MetricLabel.MetricLabel> => table.get(value) ?? table.get(fallback)!

/** Label sets each metric can have at most: the bound of the metric registry's series. */
export const LABEL_SET_COUNTS = {
  result: resultLabels.size,
  status: statusLabels.size,
  outcome: outcomeLabels.size,
  route: routeLabels.size
} as const

/** `result` as a token request's label: a code of the closed set, or `other` for anything else. */
export const tokenResultOf = (code: string | undefined): TokenResult | "other" =>
  TOKEN_RESULTS.includes(code as TokenResult) ? code as TokenResult : "other"

export const recordTokenRequest = (result: TokenResult | "other") => tokenRequests.unsafeUpdate(1, labelsOf(resultLabels, result, "other"))

/**
 * The token decision's own result, noted by the HttpApi handler for the request's metrics
 * (`RequestMetrics`), which runs in the same fiber: the label comes from the decision, as on the
 * fast lane, not from the answer read back.
 */
export const decidedTokenResult = FiberRef.unsafeMake<TokenResult | "other" | undefined>(undefined)

export const recordServiceCall = (status: number) => serviceCalls.unsafeUpdate(1, labelsOf(statusLabels, String(status), "other"))

export const recordUpstreamCall = (outcome: UpstreamOutcome) => upstreamCalls.unsafeUpdate(1, labelsOf(outcomeLabels, outcome, "other"))

export const recordOpenBreakers = (open: number) => openBreakers.unsafeUpdate(open, [])

/** `route` is a template from `Routes.routeTemplate` or `UNMATCHED_ROUTE` (anything else counts as the latter). */
export const recordDuration = (route: string, seconds: number) =>
  requestDuration.unsafeUpdate(seconds, labelsOf(routeLabels, route, UNMATCHED_ROUTE))

/**
 * The series a scraper should see at zero before the first request, so that a rate over the first
 * one is right: every token result, and the statuses a service call answers most.
 */
export const registerKnownSeries = () => {
  for (const result of TOKEN_RESULTS) tokenRequests.unsafeValue(labelsOf(resultLabels, result, "other"))
  for (const status of [200, 400, 401, 403, 404, 413, 502, 503]) serviceCalls.unsafeValue(labelsOf(statusLabels, String(status), "other"))
  for (const outcome of UPSTREAM_OUTCOMES) upstreamCalls.unsafeValue(labelsOf(outcomeLabels, outcome, "other"))
  openBreakers.unsafeValue([])
}
