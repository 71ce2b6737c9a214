/**
 * What the entry warmed of PGlite (`PgliteWarmup`), handed to the server it starts: the first
 * embedded database the server opens takes it (the memory is PGlite's from then on); any later one,
 * and a server given nothing (tests, the CLI), lets PGlite load its files itself.
 */
import { Context, Effect, Layer, Option } from "effect"
import { type PgliteWarming, warmedOptions } from "./PgliteWarmup.js"

export type WarmedOptions = Awaited<ReturnType<typeof warmedOptions>>

export class PgliteWarmed extends Context.Tag("service-auth/PgliteWarmed")<
  PgliteWarmed,
  { readonly take: () => Promise<WarmedOptions> }
>() {
  static readonly layer = (warming: PgliteWarming | undefined) =>
    Layer.sync(PgliteWarmed, () => {
      let left = warming
      return {
        take: () => {
          const taken = left
          left = undefined
          return taken === undefined ? Promise.resolve({}) : warmedOptions(taken)
        }
      }
    })
}

/** The options to open PGlite with: what was warmed for this server, if anything is left. */
export const takeWarmed: Effect.Effect<() => Promise<WarmedOptions>> = Effect.map(
  Effect.serviceOption(PgliteWarmed),
  Option.match({ onNone: () => () => Promise.resolve({}), onSome: (warmed) => warmed.take })
)
