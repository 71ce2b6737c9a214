/**
 * The profile editor's page and assets, served by the same server, and `GET /` leading to it; not
 * part of the OpenAPI document.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"

export class WebApi extends HttpApiGroup.make("web")
  .add(HttpApiEndpoint.get("home", "/"))
  .add(HttpApiEndpoint.get("adminPage", "/admin"))
  .add(HttpApiEndpoint.get("adminAsset", "/admin/assets/:file").setPath(Schema.Struct({ file: Schema.String })))
  .annotate(OpenApi.Exclude, true)
{}
