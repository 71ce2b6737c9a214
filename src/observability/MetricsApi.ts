/**
 * `GET /metrics`: the Prometheus exposition of the server's counters, histograms and process
 * figures, for operators; behind `METRICS_TOKEN` when it is set. Not part of the OpenAPI document,
 * which describes the API integrators call.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"

export class MetricsApi extends HttpApiGroup.make("metrics")
  .add(HttpApiEndpoint.get("metrics", "/metrics"))
  .annotate(OpenApi.Exclude, true)
{}
