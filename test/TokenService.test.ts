/**
 * `TokenService`: what an issued token holds, when it expires (driven by `TestClock`), and the
 * allow-list its verification enforces (RFC 8725): only RS256 under a key this server holds, no
 * `crit`, bounded size, strict structure and claim types, and the configured issuer.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import * as Jose from "jose"
import { createHmac, createPublicKey, KeyObject, randomUUID, sign } from "node:crypto"
import { AppConfig } from "../src/config/AppConfig.js"
import { KeyService, testSigningKey } from "../src/keys/KeyService.js"
import { MAX_TOKEN_LENGTH, TokenService } from "../src/token/TokenService.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import type { ServiceAddress } from "../src/domain/ServiceAddress.js"

const NOW_MS = Date.parse("2026-01-01T00:00:00Z")
const NOW = NOW_MS / 1000
const ISSUER = "http://issuer.test"
const CLIENT_ID = "svc_0123456789abcdef0123456789abcdef" as ClientId
const ADDRESS: ServiceAddress = {
  profile: "acme" as ProfileId,
  environment: "production" as EnvironmentName,
  uuid: "6f1c2a4e-8b3d-4c5e-9f10-1a2b3c4d5e6f" as ServiceUuid
}

const TokenServiceTest = Layer.provideMerge(TokenService.layer, Layer.merge(KeyService.layerTest, AppConfig.layerTest()))

// ---------------------------------------------------------------------------------------------
// Hand-made tokens

const b64 = (value: string | Buffer | object) =>
  (Buffer.isBuffer(value) ? value : Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8"))
    .toString("base64url")

/** A compact JWS signed RS256 by node:crypto with `privateKey`, whatever the header claims. */
const signRs256 = (privateKey: CryptoKey | KeyObject, header: object, payload: object | string) => {
  const input = `${b64(header)}.${b64(payload)}`
  const key = privateKey instanceof KeyObject ? privateKey : KeyObject.from(privateKey)
  return `${input}.${sign("sha256", Buffer.from(input), key).toString("base64url")}`
}

/** The claims a genuine token of this server carries at `iat`. */
const claimsAt = (iat: number, overrides: Record<string, unknown> = {}) => ({
  data: { service_uuid: ADDRESS.uuid, profile: ADDRESS.profile, environment: ADDRESS.environment },
  scope: "service:call",
  iat,
  exp: iat + 3600,
  iss: ISSUER,
  aud: `${ISSUER}/service/${ADDRESS.profile}/${ADDRESS.environment}/json/${ADDRESS.uuid}`,
  sub: CLIENT_ID,
  client_id: CLIENT_ID,
  jti: randomUUID(),
  ...overrides
})

/** A token signed with the server's own key and kid (so only the named deviation can fail it). */
const ownToken = (
  payload: object | string = claimsAt(NOW),
  header: Record<string, unknown> = {}
) => Effect.map(testSigningKey, (keys) => signRs256(keys.privateKey, { alg: "RS256", typ: "JWT", kid: keys.kid, ...header }, payload))

const segments = (token: string) => token.split(".") as [string, string, string]

/** Runs verify and answers the failure's tag (or "Success"). */
const verdict = (token: string) =>
  Effect.flatMap(TokenService, (tokens) => tokens.verify(token)).pipe(
    Effect.match({ onFailure: (error) => error._tag, onSuccess: () => "Success" as const })
  )

const atNow = TestClock.setTime(NOW_MS)

it.layer(TokenServiceTest)("TokenService", (it) => {
  it.effect("issues an RS256 JWT with the contract's header and claims", () =>
    Effect.gen(function*() {
      yield* atNow
      const tokens = yield* TokenService
      const keys = yield* testSigningKey
      const issued = yield* tokens.issue(CLIENT_ID, ADDRESS)
      expect(Jose.decodeProtectedHeader(issued.accessToken)).toEqual({ alg: "RS256", typ: "JWT", kid: keys.kid })
      const claims = Jose.decodeJwt(issued.accessToken)
      expect(Object.keys(claims).sort()).toEqual(["aud", "client_id", "data", "exp", "iat", "iss", "jti", "scope", "sub"])
      expect(claims).toEqual({
        data: { service_uuid: ADDRESS.uuid, profile: ADDRESS.profile, environment: ADDRESS.environment },
        scope: "service:call",
        iat: NOW,
        exp: NOW + 3600,
        iss: ISSUER,
        aud: `${ISSUER}/service/${ADDRESS.profile}/${ADDRESS.environment}/json/${ADDRESS.uuid}`,
        sub: CLIENT_ID,
        client_id: CLIENT_ID,
        jti: expect.stringMatching(/^[0-9a-f-]{36}$/)
      })
      expect(issued.claims).toEqual(claims)
      const again = yield* tokens.issue(CLIENT_ID, ADDRESS)
      expect(again.claims.jti).not.toBe(issued.claims.jti)
      expect(yield* tokens.verify(issued.accessToken)).toEqual(claims)
    }))

  it.effect("a token verifies until iat+3599 and is expired at iat+3600", () =>
    Effect.gen(function*() {
      yield* atNow
      const tokens = yield* TokenService
      const { accessToken, claims } = yield* tokens.issue(CLIENT_ID, ADDRESS)
      yield* TestClock.adjust("3599 seconds")
      expect((yield* tokens.verify(accessToken)).jti).toBe(claims.jti)
      yield* TestClock.adjust("1 second")
      const error = yield* Effect.flip(tokens.verify(accessToken))
      expect(error._tag).toBe("InvalidToken")
    }))

  it.effect("a token verified once is remembered by its exact text; the time checks still run on every call", () =>
    Effect.gen(function*() {
      yield* atNow
      const tokens = yield* TokenService
      const { accessToken, claims } = yield* tokens.issue(CLIENT_ID, ADDRESS)
      // Checked, then remembered (by the digest of its text): both times the claims it carries.
      expect(yield* tokens.verify(accessToken)).toStrictEqual(claims)
      expect(yield* tokens.verify(accessToken)).toStrictEqual(claims)
      // The same text with one signature character changed is another token: checked, and refused.
      const [header, payload, signature] = segments(accessToken)
      const flipped = `${header}.${payload}.${signature.slice(0, -2)}${signature.at(-2) === "A" ? "B" : "A"}${signature.at(-1)}`
      expect(yield* verdict(flipped)).toBe("InvalidToken")
      // Remembered, yet judged at the current time: before its iat (beyond the skew), then expired.
      yield* TestClock.setTime(NOW_MS - 3600_000)
      expect(yield* verdict(accessToken)).toBe("InvalidToken")
      yield* TestClock.setTime(NOW_MS + 3600_000)
      expect(yield* verdict(accessToken)).toBe("InvalidToken")
    }))

  it.effect("a token issued in a fraction of a second expires exactly at exp", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW_MS + 999)
      const tokens = yield* TokenService
      const { accessToken, claims } = yield* tokens.issue(CLIENT_ID, ADDRESS)
      expect(claims.iat).toBe(NOW)
      yield* TestClock.setTime(NOW_MS + 3599_999)
      expect(yield* verdict(accessToken)).toBe("Success")
      yield* TestClock.setTime(NOW_MS + 3600_000)
      expect(yield* verdict(accessToken)).toBe("InvalidToken")
    }))

  it.effect("a hand-made token with genuine claims and signature verifies (the baseline of the rejections below)", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken())).toBe("Success")
    }))

  it.effect("rejects alg none", () =>
    Effect.gen(function*() {
      yield* atNow
      const keys = yield* testSigningKey
      const [, payload] = segments(yield* ownToken())
      const header = b64({ alg: "none", typ: "JWT", kid: keys.kid })
      expect(yield* verdict(`${header}.${payload}.`)).toBe("InvalidToken")
      expect(yield* verdict(`${b64({ alg: "none" })}.${payload}.`)).toBe("InvalidToken")
      expect(yield* verdict(`${b64({ alg: "none" })}.${payload}.${b64("x")}`)).toBe("InvalidToken")
    }))

  it.effect("rejects HS256 signed with the public key's PEM as the HMAC secret", () =>
    Effect.gen(function*() {
      yield* atNow
      const keys = yield* testSigningKey
      const publicPem = yield* Effect.promise(() => Jose.exportSPKI(createPublicKey({ key: { ...keys.publicJwk }, format: "jwk" })))
      const input = `${b64({ alg: "HS256", typ: "JWT", kid: keys.kid })}.${b64(claimsAt(NOW))}`
      for (const secret of [publicPem, publicPem.trim()]) {
        const signature = createHmac("sha256", Buffer.from(secret, "utf8")).update(input).digest("base64url")
        expect(yield* verdict(`${input}.${signature}`)).toBe("InvalidToken")
      }
    }))

  it.effect("rejects a token signed by another RSA key under the server's kid", () =>
    Effect.gen(function*() {
      yield* atNow
      const keys = yield* testSigningKey
      const other = yield* Effect.promise(() => Jose.generateKeyPair("RS256", { modulusLength: 2048 }))
      const forged = signRs256(other.privateKey, { alg: "RS256", typ: "JWT", kid: keys.kid }, claimsAt(NOW))
      expect(yield* verdict(forged)).toBe("InvalidToken")
      const viaJose = yield* Effect.promise(() =>
        new Jose.SignJWT(claimsAt(NOW)).setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid }).sign(other.privateKey)
      )
      expect(yield* verdict(viaJose)).toBe("InvalidToken")
    }))

  it.effect("rejects a tampered payload under the original signature", () =>
    Effect.gen(function*() {
      yield* atNow
      const tokens = yield* TokenService
      const { accessToken, claims } = yield* tokens.issue(CLIENT_ID, ADDRESS)
      const [header, , signature] = segments(accessToken)
      for (
        const tampered of [
          { ...claims, data: { ...claims.data, profile: "someone-else" } },
          { ...claims, exp: claims.exp + 86_400 },
          { ...claims, scope: "service:call admin" }
        ]
      ) {
        expect(yield* verdict(`${header}.${b64(tampered)}.${signature}`)).toBe("InvalidToken")
      }
    }))

  it.effect("rejects an unknown kid and a missing kid", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken(claimsAt(NOW), { kid: "some-other-key" }))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW), { kid: undefined }))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW), { kid: 42 }))).toBe("InvalidToken")
    }))

  it.effect("rejects a crit header", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken(claimsAt(NOW), { crit: ["exp"] }))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW), { crit: ["urn:example"], "urn:example": true })))
        .toBe("InvalidToken")
    }))

  it.effect("rejects a token over 8192 characters even when genuinely signed", () =>
    Effect.gen(function*() {
      yield* atNow
      const padded = (length: number) =>
        Effect.gen(function*() {
          const base = yield* ownToken(claimsAt(NOW, { pad: "" }))
          return yield* ownToken(claimsAt(NOW, { pad: "x".repeat(Math.ceil((length - base.length) * 3 / 4) + 8) }))
        })
      const oversized = yield* padded(MAX_TOKEN_LENGTH + 1)
      expect(MAX_TOKEN_LENGTH).toBe(8192)
      expect(oversized.length).toBeGreaterThan(8192)
      expect(yield* verdict(oversized)).toBe("InvalidToken")
      // The same shape under the limit is fine: only the size failed it.
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { pad: "x".repeat(4000) })))).toBe("Success")
    }))

  it.effect("rejects 2 or 4 segments and characters outside base64url", () =>
    Effect.gen(function*() {
      yield* atNow
      const token = yield* ownToken()
      const [header, payload, signature] = segments(token)
      const malformed = [
        `${header}.${payload}`,
        `${header}.${payload}.${signature}.${signature}`,
        `${header}.${payload}.${signature}.`,
        `${header}..${signature}`,
        `${header}.${payload}.${signature}=`,
        `${header}.${payload.slice(0, 10)}+${payload.slice(11)}.${signature}`,
        `${header}.${payload}.${signature.slice(0, 10)}/${signature.slice(11)}`,
        ` ${token}`,
        `${token}\n`,
        ""
      ]
      for (const candidate of malformed) {
        expect(yield* verdict(candidate), JSON.stringify(candidate.slice(0, 40))).toBe("InvalidToken")
      }
    }))

  it.effect("rejects claims of the wrong type: exp as a string", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { exp: String(NOW + 3600) })))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { iat: String(NOW) })))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { data: "acme/production" })))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { sub: "svc_someone_else" })))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken("not json"))).toBe("InvalidToken")
    }))

  it.effect("rejects an iat far in the future", () =>
    Effect.gen(function*() {
      yield* atNow
      const keys = yield* testSigningKey
      const future = NOW + 86_400
      const token = yield* Effect.promise(() =>
        new Jose.SignJWT(claimsAt(future))
          .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid })
          .sign(keys.privateKey)
      )
      expect(yield* verdict(token)).toBe("InvalidToken")
      // A few seconds of clock skew between instances is tolerated.
      expect(yield* verdict(yield* ownToken(claimsAt(NOW + 5)))).toBe("Success")
    }))

  it.effect("rejects a wrong issuer when the issuer is configured", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { iss: "http://elsewhere.test" })))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { iss: undefined })))).toBe("InvalidToken")
    }))

  it.effect("accepts another instance's default issuer when no issuer is configured", () =>
    Effect.gen(function*() {
      yield* atNow
      const token = yield* ownToken(claimsAt(NOW, { iss: "http://localhost:3001" }))
      // Another instance of the same deployment: the same key, its own settings.
      const keys = yield* KeyService
      const unconfigured = Layer.provide(
        TokenService.layer,
        Layer.merge(Layer.succeed(KeyService, keys), AppConfig.layerTest({ issuer: "http://localhost:3000", issuerConfigured: false }))
      )
      const result = yield* verdict(token).pipe(Effect.provide(unconfigured))
      expect(result).toBe("Success")
    }))

  it.effect("aud: a token is for the service whose call URL it names, under this issuer", () =>
    Effect.gen(function*() {
      yield* atNow
      const tokens = yield* TokenService
      const other = { ...ADDRESS, uuid: "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10" } as ServiceAddress
      const claimsOf = (token: string) => Effect.flatMap(TokenService, (t) => t.verify(token))
      const genuine = yield* claimsOf(yield* ownToken())
      expect(tokens.isForService(genuine, ADDRESS)).toBe(true)
      expect(tokens.isForService(genuine, other)).toBe(false)
      // data right, aud naming another service, another issuer, or no service at all: not for it.
      for (
        const aud of [
          `${ISSUER}/service/${other.profile}/${other.environment}/json/${other.uuid}`,
          `http://elsewhere.test/service/${ADDRESS.profile}/${ADDRESS.environment}/json/${ADDRESS.uuid}`,
          ISSUER
        ]
      ) {
        expect(tokens.isForService(yield* claimsOf(yield* ownToken(claimsAt(NOW, { aud }))), ADDRESS)).toBe(false)
      }
      // aud missing, or not a string: the claims are invalid.
      const { aud: _, ...withoutAud } = claimsAt(NOW)
      expect(yield* verdict(yield* ownToken(withoutAud))).toBe("InvalidToken")
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { aud: [claimsAt(NOW).aud] })))).toBe("InvalidToken")
    }))

  it.effect("aud without a configured issuer: another instance's default issuer is accepted, the path must match", () =>
    Effect.gen(function*() {
      yield* atNow
      // Another instance of the same deployment: the same key, its own settings.
      const keys = yield* KeyService
      const unconfigured = Layer.provide(
        TokenService.layer,
        Layer.merge(Layer.succeed(KeyService, keys), AppConfig.layerTest({ issuer: "http://localhost:3000", issuerConfigured: false }))
      )
      const path = `/service/${ADDRESS.profile}/${ADDRESS.environment}/json/${ADDRESS.uuid}`
      const check = (aud: string) =>
        Effect.gen(function*() {
          const tokens = yield* TokenService
          const claims = yield* tokens.verify(yield* ownToken(claimsAt(NOW, { iss: "http://localhost:3001", aud })))
          return tokens.isForService(claims, ADDRESS)
        }).pipe(Effect.provide(unconfigured))
      expect(yield* check(`http://localhost:3001${path}`)).toBe(true)
      expect(
        yield* check(`http://localhost:3001/service/${ADDRESS.profile}/${ADDRESS.environment}/json/0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10`)
      ).toBe(false)
    }))

  it.effect("answers InsufficientScope for an otherwise valid token without service:call", () =>
    Effect.gen(function*() {
      yield* atNow
      for (const scope of ["", "service:read", "service:calls", "admin service:callx"]) {
        expect(yield* verdict(yield* ownToken(claimsAt(NOW, { scope })))).toBe("InsufficientScope")
      }
      expect(yield* verdict(yield* ownToken(claimsAt(NOW, { scope: "profile:read service:call" })))).toBe("Success")
    }))

  it.effect("expiry beats scope: an expired token without service:call is InvalidToken", () =>
    Effect.gen(function*() {
      yield* atNow
      expect(yield* verdict(yield* ownToken(claimsAt(NOW - 3600, { scope: "other" })))).toBe("InvalidToken")
    }))
})
