/**
 * `GET /metrics`: samples the process figures and counts the catalogue, then writes every metric of
 * this server in the Prometheus text format. With METRICS_TOKEN set, the scrape must present it as
 * `Authorization: Bearer <token>` (compared in constant time); otherwise 401 with the admin API's
 * error body and a Bearer challenge. When storage does not answer, the catalogue gauges are left
 * out of that scrape (a stale count would read as a real one) and the rest is still served.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Metric, Option, Redacted } from "effect"
import { timingSafeEqual } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../server/Api.js"
import { InvalidRequest, Unauthorized } from "../domain/Errors.js"
import { ProcessMetrics } from "./ProcessMetrics.js"
import * as Prometheus from "./Prometheus.js"
import { registerKnownSeries } from "./ServiceMetrics.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import { currentDate } from "../domain/Time.js"
import { tokenDigest } from "../domain/TokenDigest.js"
import { type AuthorizationHeader, isMultiple, MULTIPLE_AUTHORIZATION, parseAuthorization } from "../domain/AuthorizationHeader.js"
import { requestAuthorization } from "../server/RequestAuthorization.js"
import { errorResponse } from "../server/ErrorResponses.js"

const PREFIXES = ["service_auth_", "process_", "nodejs_"]

const gauge = (name: string, description: string) => Metric.gauge(name, { description })
const CATALOGUE = {
  profiles: gauge("service_auth_profiles", "Profiles in the catalogue."),
  environments: gauge("service_auth_environments", "Environments in the catalogue, across profiles."),
  services: gauge("service_auth_services", "Services in the catalogue, across profiles and environments."),
  credentials: gauge("service_auth_credentials", "Live (not deleted) credentials, across services.")
}
const EXPIRING_NAME = "service_auth_credentials_expiring"
const expiring = gauge(
  EXPIRING_NAME,
  "Live credentials that expire within the period `within` (7d, 30d) and have not expired yet, across services."
)
const EXPIRING = { within7d: Metric.tagged(expiring, "within", "7d"), within30d: Metric.tagged(expiring, "within", "30d") }
const CATALOGUE_NAMES = new Set([...Object.keys(CATALOGUE).map((key) => `service_auth_${key}`), EXPIRING_NAME])

const unauthorized = (description: string) =>
  errorResponse(new Unauthorized({ description }), { "www-authenticate": `Bearer realm="metrics"` })

export const layer = HttpApiBuilder.group(Api, "metrics", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const queries = yield* CatalogueQueries
    const processMetrics = yield* ProcessMetrics
    const expected = Option.map(config.metricsToken, (token) => tokenDigest(Redacted.value(token)))
    registerKnownSeries()

    const authorized = (header: AuthorizationHeader) => {
      if (Option.isNone(expected)) return true
      if (isMultiple(header)) return false
      const credentials = header === undefined ? undefined : parseAuthorization(header)
      return credentials?.scheme === "bearer" && timingSafeEqual(tokenDigest(credentials.value), expected.value)
    }

    const scrape = Effect.gen(function*() {
      yield* processMetrics.sample
      const counts = yield* Effect.option(
        Effect.all([queries.countCatalogue, Effect.flatMap(currentDate, queries.countExpiring)])
      )
      if (Option.isSome(counts)) {
        const [catalogue, soon] = counts.value
        for (const [key, metric] of Object.entries(CATALOGUE)) {
          metric.unsafeUpdate(catalogue[key as keyof typeof CATALOGUE], [])
        }
        EXPIRING.within7d.unsafeUpdate(soon.within7d, [])
        EXPIRING.within30d.unsafeUpdate(soon.within30d, [])
      }
      const snapshot = yield* Metric.snapshot
      const shown = Option.isSome(counts)
        ? snapshot
        : snapshot.filter((pair) => !CATALOGUE_NAMES.has(pair.metricKey.name))
      return HttpServerResponse.text(Prometheus.render(shown, PREFIXES), {
        contentType: Prometheus.CONTENT_TYPE,
        headers: { "cache-control": "no-store" }
      })
    })

    return handlers.handle("metrics", () =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const header = requestAuthorization(request)
        if (authorized(header)) return scrape
        if (isMultiple(header)) return Effect.succeed(errorResponse(new InvalidRequest({ description: MULTIPLE_AUTHORIZATION })))
        return Effect.succeed(
          unauthorized(
            header === undefined
              ? "Send the metrics token as Authorization: Bearer <token>"
              : "The metrics token is not valid"
          )
        )
      }))
  })).pipe(Layer.provide(ProcessMetrics.layer))
