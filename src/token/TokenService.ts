/**
 * Issues and verifies access tokens: RS256 JWTs (RFC 7519, RFC 9068 claims) that live 3600 s.
 * Time is Effect's `Clock`, so `TestClock` drives expiry in tests.
 *
 * Verification is an allow-list (RFC 8725): only `RS256`, only keys this server holds and has not
 * retired (by `kid`; a kid it does not hold makes it reload its keys once, see `KeyService`; `jku`,
 * `x5u` and embedded `jwk` headers are never followed), no `crit` extensions, and cheap
 * structural checks before any cryptography, so an oversized or malformed token costs nothing.
 * Tokens are signed with WebCrypto (on the thread pool) by the key the schedule names for their
 * `iat`, from a pre-encoded header, and checked with
 * node:crypto's synchronous RSA verify (WebCrypto's is about ten times slower), once per token:
 * a verified token is remembered by the SHA-256 digest of its exact text, and only the
 * time-dependent checks run again.
 * Whether the issuing credential is still live is the caller's check, made in the same database
 * read that finds the service.
 */
import { ExpiringEntries, sweepPeriodically } from "../domain/ExpiringEntries.js"
import { Clock, Context, Effect, Either, Layer, Schema } from "effect"
import * as Jose from "jose"
import { KeyObject, randomUUID, verify as verifySignature } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import { InsufficientScope, InvalidToken } from "../domain/Errors.js"
import { ClientId } from "../domain/Identifiers.js"
import { sha256Base64url } from "../domain/Sha256.js"
import { type ServiceAddress, servicePath } from "../domain/ServiceAddress.js"
import { INSTANCE_CLOCK_SKEW_SECONDS, SERVICE_CALL_SCOPE, TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import { KeyService } from "../keys/KeyService.js"
import { SIGNING_ALGORITHM } from "../keys/SigningKeyMaterial.js"

/** Larger tokens are refused before they are parsed; ours are about 800 bytes. */
export const MAX_TOKEN_LENGTH = 8192

const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/

const VerifiedClaims = Schema.Struct({
  data: Schema.Struct({ service_uuid: Schema.String, profile: Schema.String, environment: Schema.String }),
  scope: Schema.String,
  iat: Schema.Int,
  exp: Schema.Int,
  iss: Schema.String,
  aud: Schema.String,
  sub: ClientId,
  client_id: ClientId,
  jti: Schema.String,
  nbf: Schema.optionalWith(Schema.Int, { exact: true }),
  /** A DPoP-bound token's key (RFC 9449 §6.1): the proof key's thumbprint. */
  cnf: Schema.optionalWith(Schema.Struct({ jkt: Schema.String }), { exact: true })
})
export type AccessTokenClaims = typeof VerifiedClaims.Type
const decodeClaims = Schema.decodeUnknownOption(VerifiedClaims)

export interface IssuedToken {
  readonly accessToken: string
  readonly claims: AccessTokenClaims
}

export interface TokenServiceShape {
  /** A token for `clientId` to call `address`; bound to the DPoP key of thumbprint `jkt` when given. */
  readonly issue: (clientId: ClientId, address: ServiceAddress, jkt?: string) => Effect.Effect<IssuedToken>
  readonly verify: (token: string) => Effect.Effect<AccessTokenClaims, InvalidToken | InsufficientScope>
  /** The one implementation of `issue`: at a given time (ms since the epoch), as a promise. */
  readonly issueAt: (clientId: ClientId, address: ServiceAddress, nowMillis: number, jkt?: string) => Promise<IssuedToken>
  /**
   * Whether verified claims are for the service at `address`: `data` names it, and `aud` is its
   * service-call URL (under this issuer; when ISSUER is not set, instances name themselves by their
   * port, so only the path is compared).
   */
  readonly isForService: (claims: AccessTokenClaims, address: ServiceAddress) => boolean
  /** The one implementation of `verify`: at a given time (ms since the epoch), synchronously. */
  readonly verifyAt: (
    token: string,
    nowMillis: number
  ) => Either.Either<AccessTokenClaims, InvalidToken | InsufficientScope>
  /**
   * Whether `verifyAt` refused the token only for a `kid` this instance does not hold yet (rotated
   * on another instance a moment ago?): `learnKeyOf` reloads the keys once, then it can be decided.
   */
  readonly isUnknownKey: (error: InvalidToken | InsufficientScope) => boolean
  readonly learnKeyOf: (token: string) => Effect.Effect<void>
}

const invalid = (description: string) => new InvalidToken({ description })
/** One instance each, so that `verify` can tell an unknown key from every other failure. */
const unknownKey = invalid("The access token is signed with an unknown key")
const retiredKey = invalid("The access token is signed with a retired key")

/** The `kid` of a token whose header parsed (`checkSigned` got that far). */
const kidOf = (token: string): string => {
  const { kid } = Jose.decodeProtectedHeader(token)
  return typeof kid === "string" ? kid : ""
}

/**
 * Verified tokens remembered at the most (about 600 bytes each: the digest and the claims; less for
 * several tokens of one credential, which share their strings). Clients reuse a token for its hour,
 * so a catalogue's clients each with a live token must fit (20,000 credentials: 12 MB); past the
 * bound the oldest is forgotten, one at a time: all live equally long, so the oldest expires first.
 * Only tokens that passed the signature check are held, so clients cannot fill it with made-up ones.
 */
export const MAX_VERIFIED_TOKENS = 50_000

/**
 * Distinct strings the remembered tokens share at the most (client ids, audiences, services' names,
 * key ids: a few per credential); past it the table starts again, about 2 MB at worst.
 */
const MAX_SHARED_STRINGS = 20_000

/**
 * The key a verified token is remembered by: the SHA-256 digest of its exact text (43 characters)
 * instead of the text (about 1.1 KB), which was two thirds of the memory a spread of clients held.
 * A token that differs by one byte has another digest, so it is verified in full. Hashing costs
 * no more than the lookup of the long text did.
 */
const digestOf = sha256Base64url

/** What the time-independent checks of a token established, remembered by the digest of its text. */
interface SignedToken {
  readonly kid: string
  readonly claims: AccessTokenClaims
}

/** What a token's signature records on its request's span (on either entry). */
export const SIGNATURE_ATTRIBUTES = { "jwt.alg": SIGNING_ALGORITHM } as const

export class TokenService extends Context.Tag("service-auth/TokenService")<TokenService, TokenServiceShape>() {
  static readonly layer = Layer.scoped(
    TokenService,
    Effect.gen(function*() {
      const keys = yield* KeyService
      const config = yield* AppConfig
      const sign = async (claims: AccessTokenClaims, nowMillis: number): Promise<string> => {
        // The key the schedule names for this moment; its protected header is encoded once.
        const key = keys.signingKeyAt(nowMillis)
        const signingInput = `${key.encodedHeader}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`
        // WebCrypto signs on libuv's thread pool, off the event loop.
        const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key.privateKey, Buffer.from(signingInput))
        return `${signingInput}.${Buffer.from(signature).toString("base64url")}`
      }

      const isForService = (claims: AccessTokenClaims, address: ServiceAddress) =>
        claims.data.profile === address.profile && claims.data.environment === address.environment &&
        claims.data.service_uuid === address.uuid &&
        (config.issuerConfigured
          ? claims.aud === `${config.issuer}${servicePath(address)}`
          : claims.aud.endsWith(servicePath(address)))

      const issueAt = async (clientId: ClientId, address: ServiceAddress, nowMillis: number, jkt?: string): Promise<IssuedToken> => {
        const iat = Math.floor(nowMillis / 1000)
        const claims: AccessTokenClaims = {
          data: { service_uuid: address.uuid, profile: address.profile, environment: address.environment },
          scope: SERVICE_CALL_SCOPE,
          iat,
          exp: iat + TOKEN_LIFETIME_SECONDS,
          iss: config.issuer,
          // The absolute URL of the one service call the token is for (RFC 9068 §3): resource
          // servers that check the audience accept it, and it cannot be replayed elsewhere.
          aud: `${config.issuer}${servicePath(address)}`,
          sub: clientId,
          client_id: clientId,
          jti: randomUUID(),
          ...(jkt === undefined ? {} : { cnf: { jkt } })
        }
        return { accessToken: await sign(claims, nowMillis), claims }
      }

      // The token endpoint signs through `issueAt`, in its execution's spans (`TokenExecution`).
      const issue = (clientId: ClientId, address: ServiceAddress, jkt?: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => issueAt(clientId, address, now, jkt)))

      // One copy of each string that the tokens of one credential, service or key repeat (client
      // id, audience, the service's names, key id): a client that takes a new token before its
      // last one expires has several remembered at once, and a fresh parse gives each its own
      // copies. Emptied past a bound, so names of services long gone do not stay.
      const strings = new Map<string, string>()
      const held = (value: string): string => {
        const known = strings.get(value)
        if (known !== undefined) return known
        if (strings.size >= MAX_SHARED_STRINGS) strings.clear()
        strings.set(value, value)
        return value
      }

      /**
       * The claims as they are remembered: the strings every token repeats taken from this server's
       * own (`iss`, `scope`; `sub` is `client_id`, checked) or from `held`: equal values, so answers
       * do not change, and each remembered token holds no copy of them.
       */
      const shared = (claims: AccessTokenClaims): AccessTokenClaims => {
        const clientId = held(claims.client_id) as ClientId
        return {
          ...claims,
          data: {
            service_uuid: held(claims.data.service_uuid),
            profile: held(claims.data.profile),
            environment: held(claims.data.environment)
          },
          scope: claims.scope === SERVICE_CALL_SCOPE ? SERVICE_CALL_SCOPE : claims.scope,
          iss: claims.iss === config.issuer ? config.issuer : claims.iss,
          aud: held(claims.aud),
          sub: clientId,
          client_id: clientId
        }
      }

      /** Structure, header, signature and claims: everything but the expiry (and the key's retirement). */
      const checkSigned = (token: string, nowMillis: number): Either.Either<SignedToken, InvalidToken> => {
        if (token.length > MAX_TOKEN_LENGTH) return Either.left(invalid("The access token is too large"))
        if (!JWS_COMPACT.test(token)) return Either.left(invalid("The access token is malformed"))
        let header: Jose.ProtectedHeaderParameters
        try {
          header = Jose.decodeProtectedHeader(token)
        } catch {
          return Either.left(invalid("The access token is malformed"))
        }
        if (header.alg !== SIGNING_ALGORITHM) return Either.left(invalid("The access token is not signed with RS256"))
        if (header.crit !== undefined) return Either.left(invalid("The access token has unsupported critical headers"))
        if (header.typ !== undefined && header.typ !== "JWT") return Either.left(invalid("The access token has the wrong type"))
        const kid = typeof header.kid === "string" ? header.kid : undefined
        const key = kid === undefined ? undefined : keys.verificationKeyAt(kid, nowMillis)
        if (kid === undefined || key === undefined) return Either.left(unknownKey)
        if (key === "retired") return Either.left(retiredKey)

        const [encodedHeader, encodedPayload, signature] = token.split(".") as [string, string, string]
        const signed = verifySignature(
          "sha256",
          Buffer.from(`${encodedHeader}.${encodedPayload}`),
          key,
          Buffer.from(signature, "base64url")
        )
        if (!signed) return Either.left(invalid("The access token signature is invalid"))
        let payload: unknown
        try {
          payload = JSON.parse(Buffer.from(encodedPayload, "base64url").toString("utf8"))
        } catch {
          return Either.left(invalid("The access token is malformed"))
        }
        const claims = decodeClaims(payload)
        if (claims._tag === "None" || claims.value.sub !== claims.value.client_id) {
          return Either.left(invalid("The access token claims are invalid"))
        }
        if (config.issuerConfigured && claims.value.iss !== config.issuer) {
          return Either.left(invalid("The access token was issued by another issuer"))
        }
        return Either.right({ kid: held(kid), claims: shared(claims.value) })
      }

      // A client presents the same token for up to an hour: its signature is checked once, then the
      // digest of its exact text is remembered (only a token that passed every time-independent check
      // is, and only while its key is still held). The time-dependent checks run on every call. Tokens
      // are not remembered as they are signed: a burst of token requests would push out the ones in use.
      // Insertion order: the first is the token remembered longest ago. One leaves by itself when it
      // expires (it would be refused then anyway).
      const verified = new ExpiringEntries<string, SignedToken>(MAX_VERIFIED_TOKENS)
      yield* sweepPeriodically([verified])
      const remember = (digest: string, signed: SignedToken, nowMillis: number) =>
        verified.set(digest, signed, signed.claims.exp * 1000, nowMillis)
      const signedToken = (token: string, nowMillis: number): Either.Either<SignedToken, InvalidToken> => {
        // Oversized text is refused (by `checkSigned`) before anything else: it is not even hashed.
        if (token.length > MAX_TOKEN_LENGTH) return checkSigned(token, nowMillis)
        const digest = digestOf(token)
        const known = verified.get(digest, nowMillis)
        if (known !== undefined) {
          if (keys.verificationKeyAt(known.kid, nowMillis) instanceof KeyObject) return Either.right(known)
          verified.delete(digest)
        }
        const checked = checkSigned(token, nowMillis)
        if (Either.isRight(checked)) remember(digest, checked.right, nowMillis)
        return checked
      }

      const verifyAt = (
        token: string,
        nowMillis: number
      ): Either.Either<AccessTokenClaims, InvalidToken | InsufficientScope> => {
        const signed = signedToken(token, nowMillis)
        if (Either.isLeft(signed)) return Either.left(signed.left)
        const { claims } = signed.right
        const now = Math.floor(nowMillis / 1000)
        if (claims.nbf !== undefined && claims.nbf > now + INSTANCE_CLOCK_SKEW_SECONDS) {
          return Either.left(invalid("The access token is not yet valid"))
        }
        if (now >= claims.exp) return Either.left(invalid("The access token expired"))
        if (claims.iat > now + INSTANCE_CLOCK_SKEW_SECONDS) return Either.left(invalid("The access token is not yet valid"))
        if (!claims.scope.split(" ").includes(SERVICE_CALL_SCOPE)) {
          return Either.left(
            new InsufficientScope({ description: `The access token lacks the ${SERVICE_CALL_SCOPE} scope` })
          )
        }
        return Either.right(claims)
      }

      const isUnknownKey = (error: InvalidToken | InsufficientScope) => error === unknownKey
      const learnKeyOf = (token: string) => keys.learn(kidOf(token))

      const verify = Effect.fn("TokenService.verify", { captureStackTrace: false })(function*(token: string) {
        const verified = verifyAt(token, yield* Clock.currentTimeMillis)
        if (Either.isRight(verified) || !isUnknownKey(verified.left)) return yield* verified
        // A key this instance does not hold yet: one reload from the database, then the verdict.
        yield* learnKeyOf(token)
        return yield* verifyAt(token, yield* Clock.currentTimeMillis)
      })

      return TokenService.of({ issue, verify, issueAt, verifyAt, isForService, isUnknownKey, learnKeyOf })
    })
  )
}
