/**
 * `PUT .../credentials/{client_id}/introspect_profiles`: an admin sets which profiles' tokens a
 * credential may introspect. Another role gets 403 naming the action, after its scope (a profile
 * out of reach is 404, as for a profile that does not exist).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { Api } from "../server/Api.js"
import { AdminActor } from "../domain/AdminActor.js"
import { authorizeOn } from "../domain/AdminRoles.js"
import { NotFound } from "../domain/Errors.js"
import { ClientId } from "../domain/Identifiers.js"
import { currentDate } from "../domain/Time.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import { CatalogueWrites } from "../catalogue/CatalogueWrites.js"
import { adminMiddleware } from "./AdminHttp.js"

const credentialNotFound = new NotFound({ description: "No such live credential on this service" })

export const layer = HttpApiBuilder.group(Api, "credentialIntrospection", (handlers) =>
  Effect.gen(function*() {
    const queries = yield* CatalogueQueries
    const writes = yield* CatalogueWrites
    return handlers.handle("putIntrospectProfiles", ({ path: { client_id, ...address }, payload }) =>
      Effect.gen(function*() {
        const actor = yield* AdminActor
        yield* Either.match(authorizeOn(actor, "introspection.allow", address.profile, credentialNotFound), {
          onLeft: Effect.fail,
          onRight: () => Effect.void
        })
        // Not echoed: whatever was sent is not a client id (and might be a misplaced secret).
        if (!Schema.is(ClientId)(client_id)) return yield* credentialNotFound
        const set = yield* writes.setIntrospectProfiles(address, client_id, payload.introspect_profiles, yield* currentDate, actor)
        if (Option.isNone(set)) return yield* credentialNotFound
        const service = yield* queries.getService(address)
        const credential = Option.flatMapNullable(service, (s) => s.credentials.find((c) => c.client_id === client_id))
        // Deleted between the write and the read.
        return yield* Option.match(credential, { onNone: () => Effect.fail(credentialNotFound), onSome: Effect.succeed })
      }))
  })).pipe(Layer.provide(adminMiddleware))
