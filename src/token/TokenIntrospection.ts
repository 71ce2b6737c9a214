/**
 * `POST /oauth/introspect` (RFC 7662), for resource servers that want to know whether a token is
 * still good (revoked, its credential deleted, expired) rather than only well signed. Two kinds of
 * caller, one method a request:
 * - a resource server's credential, authenticated exactly as at the token endpoint
 *   (`client_secret_basic`, `client_secret_post`, `private_key_jwt`; `FormClientAuthentication`,
 *   the token endpoint's throttle), for the tokens of the profiles the operator listed in its
 *   `introspect_profiles`; a credential with none is `403 unauthorized_client`;
 * - an admin token (`Authorization: Bearer`): any role whose profiles cover the token's profile, or
 *   an `introspector` token (scoped to profiles, good for nothing else); a wrong one is `401`
 *   (counted toward the admin throttle, as at the admin API).
 * Neither is `401` with the admin challenge; both at once is `400 invalid_request`.
 *
 * An active token answers its claims (a DPoP-bound one as `DPoP` with `cnf.jkt`); every other case
 * (expired, revoked, of a deleted or expired credential or service, forged, signed by a key not
 * held, of another issuer, unparseable, for a service no longer `oauth`, or outside the caller's
 * profiles) answers exactly `{"active":false}`, so the answer tells the caller nothing more. The
 * token is checked as a service call checks it (`TokenStanding`): the signature once per token
 * (`TokenService`), then the route from the catalogue cache, which holds the credential's liveness
 * and its revoked tokens; an admin caller's token is remembered for as long as that cache's
 * generation (no database read once warm; see `resolveCaller`). */
import { Context, Effect, Either, Layer, Option } from "effect"
import { AdminAccess, type AdminIdentity } from "../admin/AdminAccess.js"
import { tokenDigest } from "../domain/TokenDigest.js"
import { authorize, reaches } from "../domain/AdminRoles.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import {
  AdminTooManyAttempts,
  INVALID_REQUEST_DESCRIPTION,
  IntrospectionNotAllowed,
  InvalidRequest,
  Unauthorized
} from "../domain/Errors.js"
import type { ProfileId } from "../domain/Identifiers.js"
import { serviceAddress } from "../domain/ServiceAddress.js"
import { LAST_USED_EVERY_MS } from "../admin/AdminTokenStore.js"
import { CatalogueLookup } from "../catalogue/CatalogueLookup.js"
import { isMultiple, MULTIPLE_AUTHORIZATION, parseAuthorization } from "../domain/AuthorizationHeader.js"
import { AdminFailureLimiter } from "./AuthFailureLimiter.js"
import type { FormInput } from "./TokenRevocation.js"
import { clientRefusal, FormClientAuthentication } from "./FormClientAuthentication.js"
import { clientCredentials, formFieldsOf, NO_STORE, TWO_METHODS } from "./TokenForm.js"
import { type AccessTokenClaims, TokenService } from "./TokenService.js"
import { ExpiringEntries, sweepPeriodically } from "../domain/ExpiringEntries.js"
import { boundKey, tokenStanding } from "./TokenStanding.js"

/** The admin API's challenge: the caller's token is an admin token. */
const CHALLENGE = { ...NO_STORE, "www-authenticate": `Bearer realm="admin"` }
const missing = errorAnswer(new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION }), NO_STORE)
const INACTIVE: Answer = { status: 200, headers: NO_STORE, body: { active: false } }
/** Admin failures are keyed by the address alone, one count with the admin API's (`AdminAuthHttp`). */
const { ANY_CLIENT } = AdminFailureLimiter

/**
 * Callers remembered at the most (resource servers: a handful); past it, the oldest is forgotten.
 * Only callers with a valid admin token are kept (about 300 bytes each: 300 KB at most), each for a
 * minute at most.
 */
export const MAX_CALLERS = 1_000

const INTROSPECTION_FIELDS = [
  "token",
  "token_type_hint",
  "client_id",
  "client_secret",
  "client_assertion",
  "client_assertion_type"
] as const
type IntrospectionField = typeof INTROSPECTION_FIELDS[number]
const introspectionFields = formFieldsOf(INTROSPECTION_FIELDS)
/** The form fields that authenticate a client (a `client_id` alone authenticates nobody, RFC 6749 §2.3). */
const CLIENT_AUTHENTICATION_FIELDS = ["client_secret", "client_assertion", "client_assertion_type"] as const
const sendsClientAuthentication = (params: URLSearchParams | undefined) =>
  params !== undefined && CLIENT_AUTHENTICATION_FIELDS.some((name) => params.getAll(name).some((value) => value !== ""))
const notAllowed = errorAnswer(new IntrospectionNotAllowed(), NO_STORE)

/**
 * An active token's answer (RFC 7662 §2.2): its claims, in this order; `nbf` when it has one. A
 * DPoP-bound token is a `DPoP` token with its key's thumbprint as `cnf.jkt` (RFC 9449 §6.2), so a
 * resource server refuses it presented without a proof by that key.
 */
export const activeAnswer = (claims: AccessTokenClaims): Answer => {
  const jkt = boundKey(claims)
  return {
    status: 200,
    headers: NO_STORE,
    body: {
      active: true,
      scope: claims.scope,
      client_id: claims.client_id,
      token_type: jkt === undefined ? "Bearer" : "DPoP",
      exp: claims.exp,
      iat: claims.iat,
      ...(claims.nbf === undefined ? {} : { nbf: claims.nbf }),
      sub: claims.sub,
      aud: claims.aud,
      iss: claims.iss,
      jti: claims.jti,
      ...(jkt === undefined ? {} : { cnf: { jkt } }),
      data: claims.data
    }
  }
}

export interface TokenIntrospectionShape {
  readonly answer: (input: FormInput) => Effect.Effect<Answer>
}

export class TokenIntrospection extends Context.Tag("service-auth/TokenIntrospection")<
  TokenIntrospection,
  TokenIntrospectionShape
>() {
  static readonly layer = Layer.scoped(
    TokenIntrospection,
    Effect.gen(function*() {
      const access = yield* AdminAccess
      const lookup = yield* CatalogueLookup
      const tokens = yield* TokenService
      const limiter = yield* AdminFailureLimiter
      const clients = yield* FormClientAuthentication

      /**
       * Callers resolved, by their token's digest, in the catalogue cache's generation (`epoch`):
       * valid while it lasts, since revoking an admin token starts a new one on every instance
       * before it is answered. Re-read once a minute (which records `last_used_at`); never a token
       * that is none.
       */
      const callers = new ExpiringEntries<string, { readonly identity: AdminIdentity; readonly epoch: number }>(MAX_CALLERS)
      yield* sweepPeriodically([callers])
      const resolveCaller = (presented: string, nowMillis: number) =>
        Effect.suspend(() => {
          const epoch = lookup.epoch()
          if (epoch === undefined) return access.resolve(presented)
          const digest = tokenDigest(presented).toString("hex")
          const known = callers.get(digest, nowMillis)
          if (known !== undefined && known.epoch === epoch) {
            return Effect.succeed(Option.some(known.identity))
          }
          return Effect.tap(access.resolve(presented), (found) =>
            Effect.sync(() => {
              callers.delete(digest)
              // Stored only if no drop happened while it was read (the read may predate a revocation).
              if (Option.isNone(found) || lookup.epoch() !== epoch) return
              callers.set(digest, { identity: found.value, epoch }, nowMillis + LAST_USED_EVERY_MS, nowMillis)
            }))
        })

      /**
       * Whether the token is active for this caller: within its profiles, and what the gateway would
       * accept for reasons of the token or its credential (`TokenStanding`, the gateway's own rule):
       * well signed by a key held, within its times, its credential live and not expired, not revoked.
       */
      const isActive = (token: string, mayIntrospect: (profile: string) => boolean, nowMillis: number) =>
        Effect.gen(function*() {
          const verified = yield* Effect.either(tokens.verify(token))
          if (Either.isLeft(verified)) return undefined
          const claims = verified.right
          if (!mayIntrospect(claims.data.profile)) return undefined
          const address = serviceAddress(claims.data.profile, claims.data.environment, claims.data.service_uuid)
          if (address === undefined) return undefined
          const clientId = Option.some(claims.client_id)
          const route = lookup.serviceRoute(address, clientId) ?? (yield* lookup.findServiceRoute(address, clientId))
          if (Option.isNone(route)) return undefined
          return tokenStanding(claims, address, route.value, nowMillis, tokens.isForService) === "acceptable" ? claims : undefined
        })

      /** An admin or introspector token as Bearer: the admin API's authentication and throttle, answered as before. */
      const asAdmin = (presented: string, params: URLSearchParams | undefined, input: FormInput) =>
        Effect.gen(function*() {
          const blocked = limiter.blockedAt(ANY_CLIENT, input.remoteAddress, input.nowMillis)
          if (Option.isSome(blocked)) return errorAnswer(new AdminTooManyAttempts({ retryAfterSeconds: blocked.value }), NO_STORE)
          const caller = yield* resolveCaller(presented, input.nowMillis)
          // As at the admin API: 401 only for a wrong token that took one of the address's attempts.
          const over = yield* Option.isNone(caller)
            ? limiter.recordFailure(ANY_CLIENT, input.remoteAddress)
            : limiter.admit(ANY_CLIENT, input.remoteAddress)
          if (Option.isSome(over)) return errorAnswer(new AdminTooManyAttempts({ retryAfterSeconds: over.value }), NO_STORE)
          if (Option.isNone(caller)) return errorAnswer(new Unauthorized({ description: "The admin token is not valid" }), CHALLENGE)
          if (Either.isLeft(authorize(caller.value, "token.introspect"))) {
            return errorAnswer(new Unauthorized({ description: "The admin token may not introspect tokens" }), CHALLENGE)
          }
          const parsed = params === undefined ? Either.right({}) : introspectionFields(params)
          if (Either.isLeft(parsed)) return errorAnswer(parsed.left, NO_STORE)
          const { token } = parsed.right as { readonly token?: string }
          if (token === undefined) return errorAnswer(new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION }), NO_STORE)
          const scope = caller.value
          const active = yield* isActive(token, (profile) => reaches(scope, profile), input.nowMillis)
          return active === undefined ? INACTIVE : activeAnswer(active)
        })

      /**
       * A resource server's credential, authenticated exactly as at the token endpoint and revocation
       * (`FormClientAuthentication`), then allowed by its `introspect_profiles`: none is 403
       * `unauthorized_client` (RFC 7662 §4: only callers authorized for the endpoint get answers);
       * a token outside them is `{"active":false}` (§2.2).
       */
      const asClient = (params: URLSearchParams | undefined, input: FormInput) =>
        Effect.gen(function*() {
          const parsed = params === undefined ? Either.right({}) : introspectionFields(params)
          if (Either.isLeft(parsed)) return clientRefusal(parsed.left)
          const fields: Partial<Record<IntrospectionField, string>> = parsed.right
          const client = clientCredentials(input.authorization, fields)
          if (Either.isLeft(client)) return clientRefusal(client.left)
          if (fields.token === undefined || client.right === undefined) return missing
          const authenticated = yield* clients.authenticate(client.right, input.remoteAddress, input.nowMillis)
          if (Either.isLeft(authenticated)) return authenticated.left
          const allowed = authenticated.right.credential.introspectProfiles
          if (allowed === null || allowed.length === 0) return notAllowed
          const active = yield* isActive(fields.token, (profile) => allowed.includes(profile as ProfileId), input.nowMillis)
          return active === undefined ? INACTIVE : activeAnswer(active)
        })

      const introspect = Effect.fn("TokenIntrospection.introspect", { captureStackTrace: false })(
        function*(input: FormInput) {
          if (isMultiple(input.authorization)) {
            return errorAnswer(new InvalidRequest({ description: MULTIPLE_AUTHORIZATION }), NO_STORE)
          }
          const params = input.form === undefined ? undefined : new URLSearchParams(input.form)
          const credentials = input.authorization === undefined ? undefined : parseAuthorization(input.authorization)
          if (credentials?.scheme === "bearer") {
            // A Bearer token and a client's credentials are two methods: which caller it is would be a guess.
            if (sendsClientAuthentication(params)) return errorAnswer(new InvalidRequest({ description: TWO_METHODS }), NO_STORE)
            return yield* asAdmin(credentials.value, params, input)
          }
          const basic = credentials?.scheme === "basic" || /^\s*basic(\s|$)/i.test(input.authorization ?? "")
          if (basic || sendsClientAuthentication(params)) return yield* asClient(params, input)
          return errorAnswer(
            new Unauthorized({ description: "Send an admin or introspector token as Authorization: Bearer <token>" }),
            CHALLENGE
          )
        },
        Effect.catchTag("StorageUnavailable", (error) => Effect.succeed(errorAnswer(error, NO_STORE)))
      )

      return TokenIntrospection.of({ answer: introspect })
    })
  )
}
