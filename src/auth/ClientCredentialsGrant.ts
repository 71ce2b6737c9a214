/**
 * The client credentials grant (RFC 6749 §4.4) once the request has been parsed: rows 4 and 5 of
 * the contract's precedence table. One indexed read finds the service and the presented client's
 * live credential together; the only write is `last_used_at`, at most once a minute per credential.
 */
import { Context, Duration, Effect, Layer, Option, type Redacted } from "effect"
import { InvalidClient, InvalidRequest, type StorageUnavailable, TooManyAttempts } from "../domain/Errors.js"
import { isClientId } from "../domain/Identifiers.js"
import { currentDate } from "../domain/Time.js"
import { CredentialRepo, serviceAddress, spanAttributes } from "../storage/CredentialRepo.js"
import { tracerEnabled } from "../Tracing.js"
import { AuthFailureLimiter } from "./AuthFailureLimiter.js"
import { ClientSecrets } from "./ClientSecrets.js"
import { type IssuedToken, TokenService } from "./TokenService.js"

export interface GrantRequest {
  readonly clientId: string
  /** None when the client's Basic credentials could not be decoded: authentication fails at row 5. */
  readonly clientSecret: Option.Option<Redacted.Redacted<string>>
  readonly profile: string
  readonly environment: string
  readonly serviceUuid: string
  readonly basic: boolean
  /** The client's address, for brute-force protection. */
  readonly remoteAddress: string
}

/** How stale `last_used_at` may get before a successful request refreshes it. */
export const LAST_USED_RESOLUTION = Duration.minutes(1)

/** Whether a successful token request must record `last_used_at` (never set, or older than the resolution). */
export const lastUsedIsStale = (lastUsedAt: Date | null, now: number): boolean =>
  lastUsedAt === null || now - lastUsedAt.getTime() >= Duration.toMillis(LAST_USED_RESOLUTION)

/** The specification's description for every row-4 failure. */
const targetNotFound = new InvalidRequest({ description: "Missing required parameters" })

export interface ClientCredentialsGrantShape {
  readonly grant: (
    request: GrantRequest
  ) => Effect.Effect<IssuedToken, InvalidRequest | InvalidClient | TooManyAttempts | StorageUnavailable>
}

export class ClientCredentialsGrant extends Context.Tag("service-auth/ClientCredentialsGrant")<
  ClientCredentialsGrant,
  ClientCredentialsGrantShape
>() {
  static readonly layer = Layer.effect(
    ClientCredentialsGrant,
    Effect.gen(function*() {
      const repo = yield* CredentialRepo
      const secrets = yield* ClientSecrets
      const tokens = yield* TokenService
      const limiter = yield* AuthFailureLimiter
      const traced = yield* tracerEnabled

      const grant = Effect.fn("ClientCredentialsGrant.grant", { captureStackTrace: false })(
        function*(request: GrantRequest) {
          const blocked = yield* limiter.blockedFor(request.clientId, request.remoteAddress)
          if (Option.isSome(blocked)) return yield* new TooManyAttempts({ retryAfterSeconds: blocked.value })
          const address = serviceAddress(request.profile, request.environment, request.serviceUuid)
          if (address === undefined) return yield* targetNotFound
          // A client id that is not of our form names no credential: row 5, like any unknown one.
          const clientId = Option.liftPredicate(request.clientId, isClientId)
          if (traced) yield* Effect.annotateCurrentSpan(spanAttributes(address, clientId))
          const target = yield* repo.findTokenTarget(address, clientId)
          if (Option.isNone(target) || target.value.authType !== "oauth") return yield* targetNotFound

          const credential = Option.getOrUndefined(target.value.credential)
          // Always run the comparison, so an unknown client id costs what a wrong secret costs.
          const authenticated = Option.match(request.clientSecret, {
            onNone: () => false,
            onSome: (secret) => secrets.matches(secret, credential?.secretHash)
          })
          if (!authenticated || credential === undefined) {
            yield* limiter.recordFailure(request.clientId, request.remoteAddress)
            return yield* new InvalidClient({ basic: request.basic })
          }

          const now = yield* currentDate
          if (lastUsedIsStale(credential.lastUsedAt, now.getTime())) yield* repo.touchCredential(credential.clientId, now)
          return yield* tokens.issue(credential.clientId, address)
        }
      )

      return ClientCredentialsGrant.of({ grant })
    })
  )
}
