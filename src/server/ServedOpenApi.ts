/**
 * The document `GET /openapi.yaml` serves: built on the first request for it, not while the server
 * starts (building and rendering it was a tenth of a start-up; its module and the YAML package are
 * imported only then), then kept for as long as the server is.
 */
import { Context, Effect, Layer } from "effect"

export interface ServedOpenApiShape {
  /** The document as YAML: built once, on first use. */
  readonly yaml: Effect.Effect<string>
  /** Whether it has been built yet (a start builds nothing it does not answer with). */
  readonly built: () => boolean
}

export class ServedOpenApi extends Context.Tag("service-auth/ServedOpenApi")<ServedOpenApi, ServedOpenApiShape>() {
  static readonly layer = Layer.effect(
    ServedOpenApi,
    Effect.gen(function*() {
      let built = false
      const yaml = yield* Effect.cached(
        Effect.promise(() => import("./OpenApiDocument.js")).pipe(
          Effect.map(({ openApiYaml }) => {
            const text = openApiYaml()
            built = true
            return text
          })
        )
      )
      return { yaml, built: () => built }
    })
  )
}
