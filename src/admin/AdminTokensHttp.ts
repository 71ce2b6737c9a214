/**
 * Handlers of the admin tokens (`AdminTokensApi`) and of `GET /admin/session`. A token is 256 random
 * bits, answered once at its creation; only its digest is stored, and neither it nor its digest is
 * ever logged or answered again.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { AdminAccess } from "./AdminAccess.js"
import { tokenDigest } from "../domain/TokenDigest.js"
import { Api } from "../server/Api.js"
import { AdminActor, type AdminCaller } from "../domain/AdminActor.js"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, InvalidRequest, NotFound } from "../domain/Errors.js"
import { ADMIN_TOKEN_ACTOR_NAME, RESERVED_ADMIN_TOKEN_NAME_RULE } from "../domain/AdminRoles.js"
import { currentDate } from "../domain/Time.js"
import { AdminTokenStore, type StoredAdminToken } from "./AdminTokenStore.js"
import { CatalogueWrites } from "../catalogue/CatalogueWrites.js"
import * as AdminAuthHttp from "./AdminAuthHttp.js"
import { adminMiddleware, permit } from "./AdminHttp.js"

/** Only an admin token manages tokens: the caller, or 403. */
const mayManageTokens = Effect.zipRight(permit("tokens.manage"), AdminActor)

/** What the audit trail records of a token: never the token. */
const tokenDetails = (token: Pick<StoredAdminToken, "name" | "role" | "profiles">) =>
  token.profiles === null ? { name: token.name, role: token.role } : { name: token.name, role: token.role, profiles: token.profiles }

export const layerTokens = HttpApiBuilder.group(Api, "adminTokens", (handlers) =>
  Effect.gen(function*() {
    const store = yield* AdminTokenStore
    const access = yield* AdminAccess
    const writes = yield* CatalogueWrites
    const taken = (name: string) => new Conflict({ description: `An admin token named ${name} exists` })

    return handlers
      .handle("createAdminToken", ({ payload }) =>
        Effect.gen(function*() {
          const caller: AdminCaller = yield* mayManageTokens
          if (access.environmentNames.has(payload.name)) return yield* taken(payload.name)
          // ADMIN_TOKEN's name even when ADMIN_TOKEN is not set: a stored `admin` would pass for it.
          if (payload.name === ADMIN_TOKEN_ACTOR_NAME) {
            return yield* new InvalidRequest({ description: `name: name must be ${RESERVED_ADMIN_TOKEN_NAME_RULE}` })
          }
          const token = randomBytes(32).toString("base64url")
          const profiles = payload.profiles == null ? null : [...new Set(payload.profiles)].sort()
          const created_at = yield* currentDate
          const stored = { name: payload.name, role: payload.role, profiles, digest: tokenDigest(token).toString("hex"), created_at }
          const event = auditEvent(caller, created_at, { action: "admin_token.created", details: tokenDetails(stored) })
          if (!(yield* store.create(stored, event))) return yield* taken(payload.name)
          return { name: stored.name, role: stored.role, profiles, token, created_at }
        }))
      .handle("listAdminTokens", () =>
        Effect.gen(function*() {
          yield* mayManageTokens
          const tokens = yield* store.list
          return {
            tokens: tokens.map(({ created_at, last_used_at, name, profiles, role }) => ({ name, role, profiles, created_at, last_used_at }))
          }
        }))
      .handle("revokeAdminToken", ({ path: { name } }) =>
        Effect.gen(function*() {
          const caller = yield* mayManageTokens
          const now = yield* currentDate
          const revoked = yield* store.revoke(
            name,
            (token) => auditEvent(caller, now, { action: "admin_token.revoked", details: tokenDetails(token) })
          )
          if (!revoked) return yield* new NotFound({ description: "No stored admin token has that name" })
          // Cached callers of introspection are dropped on every instance before the answer.
          yield* writes.dropCached
        }))
  })).pipe(Layer.provide(adminMiddleware), Layer.provide(AdminAccess.layer))

export const layerSession = HttpApiBuilder.group(Api, "session", (handlers) =>
  Effect.succeed(
    handlers.handle("getAdminSession", () => Effect.map(AdminActor, ({ name, profiles, role }) => ({ name, role, profiles })))
  )).pipe(Layer.provide(AdminAuthHttp.layer))
