import type { Layer } from "effect"

/**
 * States what an API group layer needs. `HttpApiBuilder.group` infers `unknown` requirements when
 * an endpoint with a path schema is implemented with `handleRaw` (a limit of its types), which
 * would make every layer built on it unusable. The full-stack tests build these layers, so a
 * service missing from the stated list fails them at once.
 */
export const requiring = <R>() => <A, E>(layer: Layer.Layer<A, E, unknown>): Layer.Layer<A, E, R> =>
  layer as Layer.Layer<A, E, R>
