/**
 * The pages served for people, not programs: the profile editor with its assets, `GET /` leading
 * to it, and the interactive API reference with its script. None is part of the OpenAPI document.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"

export class WebApi extends HttpApiGroup.make("web")
  .add(HttpApiEndpoint.get("home", "/"))
  .add(HttpApiEndpoint.get("favicon", "/favicon.ico"))
  .add(HttpApiEndpoint.get("adminPage", "/admin"))
  .add(HttpApiEndpoint.get("adminAsset", "/admin/assets/:file").setPath(Schema.Struct({ file: Schema.String })))
  .add(HttpApiEndpoint.get("apiReference", "/docs"))
  .add(HttpApiEndpoint.get("apiReferenceScript", "/docs/scalar.js"))
  .annotate(OpenApi.Exclude, true)
{}
