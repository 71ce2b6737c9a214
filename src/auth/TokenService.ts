/**
 * Issues and verifies access tokens: RS256 JWTs (RFC 7519, RFC 9068 claims) that live 3600 s.
 * Time is Effect's `Clock`, so `TestClock` drives expiry in tests.
 *
 * Verification is an allow-list (RFC 8725): only `RS256`, only keys this server holds (by `kid`;
 * `jku`, `x5u` and embedded `jwk` headers are never followed), no `crit` extensions, and cheap
 * structural checks before any cryptography, so an oversized or malformed token costs nothing.
 * The signature is checked with node:crypto's synchronous RSA verify (jose signs; its WebCrypto
 * verify is about ten times slower, and this is the hot path of every service call).
 * Whether the issuing credential is still live is the caller's check, made in the same database
 * read that finds the service.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as Jose from "jose"
import { randomUUID, verify as verifySignature } from "node:crypto"
import { AppConfig } from "../AppConfig.js"
import { InsufficientScope, InvalidToken } from "../domain/Errors.js"
import { ClientId } from "../domain/Identifiers.js"
import type { ServiceAddress } from "../storage/CredentialRepo.js"
import { KeyService, SIGNING_ALGORITHM } from "./KeyService.js"

export const TOKEN_LIFETIME_SECONDS = 3600
export const SERVICE_CALL_SCOPE = "service:call"
/** Larger tokens are refused before they are parsed; ours are about 800 bytes. */
export const MAX_TOKEN_LENGTH = 8192
/** Tolerated clock skew between instances for `iat`. */
const MAX_FUTURE_IAT_SECONDS = 60

const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/

const VerifiedClaims = Schema.Struct({
  data: Schema.Struct({ service_uuid: Schema.String, profile: Schema.String, environment: Schema.String }),
  scope: Schema.String,
  iat: Schema.Int,
  exp: Schema.Int,
  iss: Schema.String,
  sub: ClientId,
  client_id: ClientId,
  jti: Schema.String,
  nbf: Schema.optionalWith(Schema.Int, { exact: true })
})
export type AccessTokenClaims = typeof VerifiedClaims.Type
const decodeClaims = Schema.decodeUnknownOption(VerifiedClaims)

export interface IssuedToken {
  readonly accessToken: string
  readonly claims: AccessTokenClaims
}

export interface TokenServiceShape {
  readonly issue: (clientId: ClientId, address: ServiceAddress) => Effect.Effect<IssuedToken>
  readonly verify: (token: string) => Effect.Effect<AccessTokenClaims, InvalidToken | InsufficientScope>
}

const invalid = (description: string) => new InvalidToken({ description })

export class TokenService extends Context.Tag("service-auth/TokenService")<TokenService, TokenServiceShape>() {
  static readonly layer = Layer.effect(
    TokenService,
    Effect.gen(function*() {
      const keys = yield* KeyService
      const config = yield* AppConfig

      const issue = (clientId: ClientId, address: ServiceAddress) =>
        Effect.gen(function*() {
          const iat = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const claims: AccessTokenClaims = {
            data: { service_uuid: address.uuid, profile: address.profile, environment: address.environment },
            scope: SERVICE_CALL_SCOPE,
            iat,
            exp: iat + TOKEN_LIFETIME_SECONDS,
            iss: config.issuer,
            sub: clientId,
            client_id: clientId,
            jti: randomUUID()
          }
          const accessToken = yield* Effect.promise(() =>
            new Jose.SignJWT({ ...claims })
              .setProtectedHeader({ alg: SIGNING_ALGORITHM, typ: "JWT", kid: keys.kid })
              .sign(keys.privateKey)
          )
          return { accessToken, claims }
        }).pipe(Effect.withSpan("TokenService.issue"))

      const verify = (token: string) =>
        Effect.gen(function*() {
          if (token.length > MAX_TOKEN_LENGTH) return yield* invalid("The access token is too large")
          if (!JWS_COMPACT.test(token)) return yield* invalid("The access token is malformed")
          let header: Jose.ProtectedHeaderParameters
          try {
            header = Jose.decodeProtectedHeader(token)
          } catch {
            return yield* invalid("The access token is malformed")
          }
          if (header.alg !== SIGNING_ALGORITHM) return yield* invalid("The access token is not signed with RS256")
          if (header.crit !== undefined) return yield* invalid("The access token has unsupported critical headers")
          if (header.typ !== undefined && header.typ !== "JWT") return yield* invalid("The access token has the wrong type")
          const key = typeof header.kid === "string" ? keys.verificationKey(header.kid) : undefined
          if (key === undefined) return yield* invalid("The access token is signed with an unknown key")

          const [encodedHeader, encodedPayload, signature] = token.split(".") as [string, string, string]
          const signed = verifySignature(
            "sha256",
            Buffer.from(`${encodedHeader}.${encodedPayload}`),
            key,
            Buffer.from(signature, "base64url")
          )
          if (!signed) return yield* invalid("The access token signature is invalid")
          let payload: unknown
          try {
            payload = JSON.parse(Buffer.from(encodedPayload, "base64url").toString("utf8"))
          } catch {
            return yield* invalid("The access token is malformed")
          }
          const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const claims = decodeClaims(payload)
          if (claims._tag === "None" || claims.value.sub !== claims.value.client_id) {
            return yield* invalid("The access token claims are invalid")
          }
          if (config.issuerConfigured && claims.value.iss !== config.issuer) {
            return yield* invalid("The access token was issued by another issuer")
          }
          if (claims.value.nbf !== undefined && claims.value.nbf > now + MAX_FUTURE_IAT_SECONDS) {
            return yield* invalid("The access token is not yet valid")
          }
          if (now >= claims.value.exp) return yield* invalid("The access token expired")
          if (claims.value.iat > now + MAX_FUTURE_IAT_SECONDS) return yield* invalid("The access token is not yet valid")
          if (!claims.value.scope.split(" ").includes(SERVICE_CALL_SCOPE)) {
            return yield* new InsufficientScope({ description: `The access token lacks the ${SERVICE_CALL_SCOPE} scope` })
          }
          return claims.value
        }).pipe(Effect.withSpan("TokenService.verify"))

      return TokenService.of({ issue, verify })
    })
  )
}
