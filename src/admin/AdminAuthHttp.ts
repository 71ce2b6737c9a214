/**
 * The admin token check. The framework's bearer decoding is ignored (it does not check the scheme);
 * the header is parsed here and the token resolved by `AdminAccess` (the environment's tokens in
 * constant time, then the stored ones by digest), which names the actor and what it may do.
 *
 * Failed attempts (a bearer token that matches none) are counted per client address, like client
 * authentications (AUTH_FAILURE_LIMIT a minute, shared by instances on PostgreSQL, and with
 * `/oauth/introspect`: `AdminFailureLimiter`): an address over the limit gets 429 with Retry-After,
 * right token or not, until its minute is over; of concurrent wrong tokens, only those that took
 * one of the address's attempts are answered 401. A success does not reset the count.
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { AdminAuth } from "./AdminApi.js"
import { AdminFailureLimiter } from "../token/AuthFailureLimiter.js"
import { AdminTooManyAttempts, InvalidRequest, Unauthorized } from "../domain/Errors.js"
import { isMultiple, MULTIPLE_AUTHORIZATION, parseAuthorization } from "../domain/AuthorizationHeader.js"
import { requestAuthorization } from "../server/RequestAuthorization.js"
import { AdminAccess } from "./AdminAccess.js"

const { ANY_CLIENT } = AdminFailureLimiter

export const layer = Layer.effect(
  AdminAuth,
  Effect.gen(function*() {
    const limiter = yield* AdminFailureLimiter
    const access = yield* AdminAccess

    return AdminAuth.of({
      adminToken: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const header = requestAuthorization(request)
          if (isMultiple(header)) return yield* new InvalidRequest({ description: MULTIPLE_AUTHORIZATION })
          const credentials = header === undefined ? undefined : parseAuthorization(header)
          if (credentials === undefined || credentials.scheme !== "bearer") {
            return yield* new Unauthorized({ description: "Send the admin token as Authorization: Bearer <token>" })
          }
          // The client address: the TCP peer, or what a trusted proxy forwarded (`ClientAddress`).
          const source = Option.getOrElse(request.remoteAddress, () => "unknown")
          const blocked = yield* limiter.blockedFor(ANY_CLIENT, source)
          if (Option.isSome(blocked)) return yield* new AdminTooManyAttempts({ retryAfterSeconds: blocked.value })
          const identity = yield* access.resolve(credentials.value)
          // A wrong token is told so only when it took one of the address's attempts; a right one
          // waits for the failures being counted (`AuthFailureLimiter`).
          const over = yield* Option.isNone(identity) ? limiter.recordFailure(ANY_CLIENT, source) : limiter.admit(ANY_CLIENT, source)
          if (Option.isSome(over)) return yield* new AdminTooManyAttempts({ retryAfterSeconds: over.value })
          if (Option.isNone(identity)) return yield* new Unauthorized({ description: "The admin token is not valid" })
          return { ...identity.value, source }
        })
    })
  })
).pipe(Layer.provide(AdminAccess.layer))
