/**
 * Which admin token a bearer token is, and what it may do. The environment's tokens (ADMIN_TOKEN,
 * ADMIN_TOKENS) are admins, compared in constant time with every one of them, no early exit; any
 * other token is looked up in the store by its SHA-256 digest, and the stored digest compared again
 * in constant time (the lookup's own timing can only tell about a digest, of which a guess knows
 * nothing). Nothing is cached: a token revoked on any instance is refused from the next request on,
 * on every instance. A stored token's use is recorded at most once a minute (`last_used_at`).
 */
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { timingSafeEqual } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import type { AdminScope } from "../domain/AdminRoles.js"
import type { StorageUnavailable } from "../domain/Errors.js"
import type { ProfileId } from "../domain/Identifiers.js"
import { AdminTokenStore, LAST_USED_EVERY_MS } from "./AdminTokenStore.js"
import { tokenDigest } from "../domain/TokenDigest.js"

/** A token recognised: its name (the audit trail's actor) and what it may do. */
export interface AdminIdentity extends AdminScope {
  readonly name: string
}

export interface AdminAccessShape {
  /** The token presented, if it is one. */
  readonly resolve: (presented: string) => Effect.Effect<Option.Option<AdminIdentity>, StorageUnavailable>
  /** The names of the environment's tokens, which stored tokens may not take. */
  readonly environmentNames: ReadonlySet<string>
}

export class AdminAccess extends Context.Tag("service-auth/AdminAccess")<AdminAccess, AdminAccessShape>() {
  static readonly layer = Layer.effect(
    AdminAccess,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const store = yield* AdminTokenStore
      const configured = config.adminTokens.map(({ name, token }) => ({ name, digest: tokenDigest(Redacted.value(token)) }))

      /** The environment's token of this digest, comparing it with every one whatever matches. */
      const configuredName = (digest: Buffer): string | undefined => {
        const matches = configured.map((token) => timingSafeEqual(digest, token.digest))
        return configured[matches.indexOf(true)]?.name
      }

      const stored = (digest: Buffer) =>
        Effect.gen(function*() {
          const found = yield* store.findByDigest(digest.toString("hex"))
          if (Option.isNone(found) || !timingSafeEqual(Buffer.from(found.value.digest, "hex"), digest)) {
            return Option.none<AdminIdentity>()
          }
          const token = found.value
          const now = new Date(yield* Clock.currentTimeMillis)
          // A failed write of the last use must not refuse the request it would record.
          if (token.last_used_at === null || now.getTime() - token.last_used_at.getTime() >= LAST_USED_EVERY_MS) {
            yield* Effect.ignore(store.markUsed(token.name, now))
          }
          return Option.some<AdminIdentity>({
            name: token.name,
            role: token.role,
            profiles: token.role === "admin" ? null : (token.profiles ?? []) as ReadonlyArray<ProfileId>
          })
        })

      return AdminAccess.of({
        resolve: (presented) =>
          Effect.suspend(() => {
            const digest = tokenDigest(presented)
            const name = configuredName(digest)
            return name !== undefined
              ? Effect.succeed(Option.some<AdminIdentity>({ name, role: "admin", profiles: null }))
              : stored(digest)
          }),
        environmentNames: new Set(configured.map((token) => token.name))
      })
    })
  )
}
