/** Handlers of the signing-key endpoints of the admin API (`KeysApi`): the schedule, and a rotation. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Api } from "../server/Api.js"
import type { KeyInfo } from "../keys/KeyRing.js"
import { KeyService } from "../keys/KeyService.js"
import { AdminActor } from "../domain/AdminActor.js"
import type { SigningKeyInfo } from "../domain/SigningKeyDocuments.js"
import { adminMiddleware, permit } from "./AdminHttp.js"

const wireOf = (key: KeyInfo): SigningKeyInfo => ({
  kid: key.kid,
  status: key.status,
  created_at: key.createdAt,
  active_from: key.activeFrom,
  superseded_at: key.supersededAt,
  retires_at: key.retiresAt
})

export const layer = HttpApiBuilder.group(Api, "keys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* KeyService
    return handlers
      .handle("listKeys", () => Effect.zipRight(permit("keys.manage"), keys.list).pipe(Effect.map((list) => ({ keys: list.map(wireOf) }))))
      .handle("rotateKey", () =>
        Effect.zipRight(permit("keys.manage"), AdminActor).pipe(
          Effect.flatMap(keys.rotate),
          Effect.map((key) => ({ kid: key.kid, status: key.status, active_from: key.activeFrom }))
        ))
  })).pipe(Layer.provide(adminMiddleware))
