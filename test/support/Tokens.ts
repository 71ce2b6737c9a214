/**
 * Hand-made access tokens and service calls for the full-stack tests of
 * `POST /service/{profile}/{env}/json/{uuid}` (docs/contract.md §2): base64url segments, RS256 and HMAC
 * signatures made with node:crypto alone (so the server's own JWT library is not trusted to build
 * what it later checks), the claims a real token carries, and the call itself with exact assertions
 * on its error answers and `WWW-Authenticate` challenges.
 */
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { constants, createHmac, generateKeyPairSync, KeyObject, randomUUID, sign } from "node:crypto"
import { decodeJwt, request } from "./Http.js"
import { type Fixture, issueToken, type JsonResponse } from "../../src/testing.js"

// ---------------------------------------------------------------------------------------------
// Encoding and signing

/** base64url without padding (RFC 7515 §2) of a string, bytes, or a value serialised as JSON. */
export const base64url = (value: string | Uint8Array | object): string =>
  (value instanceof Uint8Array
    ? Buffer.from(value)
    : Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8")).toString("base64url")

/** `base64url(header).base64url(payload)`: the JWS signing input. */
export const signingInput = (header: object, payload: object | string): string => `${base64url(header)}.${base64url(payload)}`

const toKeyObject = (key: KeyObject | CryptoKey): KeyObject => (key instanceof KeyObject ? key : KeyObject.from(key))

const RSA_DIGEST = { RS256: "sha256", RS384: "sha384", RS512: "sha512" } as const

/**
 * A compact JWS signed with an RSA private key by node:crypto (RSASSA-PKCS1-v1_5). The digest
 * follows `digest` (default SHA-256), independent of the `alg` the header claims, so a header can lie.
 */
export const signWith = (
  privateKey: KeyObject | CryptoKey,
  header: object,
  payload: object | string,
  digest: keyof typeof RSA_DIGEST = "RS256"
): string => {
  const input = signingInput(header, payload)
  const signature = sign(RSA_DIGEST[digest], Buffer.from(input, "utf8"), toKeyObject(privateKey))
  return `${input}.${signature.toString("base64url")}`
}

/** A compact JWS signed with RSASSA-PSS (PS256) by the given RSA key. */
export const signPs256 = (privateKey: KeyObject | CryptoKey, header: object, payload: object): string => {
  const input = signingInput(header, payload)
  const signature = sign("sha256", Buffer.from(input, "utf8"), {
    key: toKeyObject(privateKey),
    padding: constants.RSA_PKCS1_PSS_PADDING,
    saltLength: 32
  })
  return `${input}.${signature.toString("base64url")}`
}

const HMAC_DIGEST = { HS256: "sha256", HS384: "sha384", HS512: "sha512" } as const
export type HmacAlgorithm = keyof typeof HMAC_DIGEST

/** A compact JWS whose MAC is keyed with `secret` (the algorithm-confusion attack of RFC 8725 §2.1). */
export const hmacWith = (alg: HmacAlgorithm, secret: string | Uint8Array, header: object, payload: object): string => {
  const input = signingInput(header, payload)
  const mac = createHmac(HMAC_DIGEST[alg], secret).update(input, "utf8").digest()
  return `${input}.${mac.toString("base64url")}`
}

/** An unsecured JWS (`alg: none`, RFC 7519 §6): header and payload with an empty signature. */
export const unsigned = (header: object, payload: object): string => `${signingInput(header, payload)}.`

/** A fresh 2048-bit RSA key pair that the server has never seen. */
export const attackerKeyPair = () => generateKeyPairSync("rsa", { modulusLength: 2048 })

// ---------------------------------------------------------------------------------------------
// Claims

export interface AccessClaims {
  readonly data: { readonly service_uuid: string; readonly profile: string; readonly environment: string }
  readonly scope: string
  readonly iat: number
  readonly exp: number
  readonly iss: string
  readonly aud: string
  readonly sub: string
  readonly client_id: string
  readonly jti: string
}

/** The issuer `AppConfig.layerTest` configures. */
export const TEST_ISSUER = "http://issuer.test"

/** The claims the server itself would put in a token for this fixture, issued at `nowSeconds`. */
export const realClaims = (fixture: Fixture, nowSeconds: number): AccessClaims => ({
  data: { service_uuid: fixture.uuid, profile: fixture.profile, environment: fixture.environment },
  scope: "service:call",
  iat: nowSeconds,
  exp: nowSeconds + 3600,
  iss: TEST_ISSUER,
  aud: `${TEST_ISSUER}/service/${fixture.profile}/${fixture.environment}/json/${fixture.uuid}`,
  sub: fixture.clientId,
  client_id: fixture.clientId,
  jti: randomUUID()
})

/** The header the server itself writes: `{alg: RS256, typ: JWT, kid}`. */
export const realHeader = (kid: string) => ({ alg: "RS256", typ: "JWT", kid })

/**
 * The server's current time in Unix seconds, read from the `iat` of a token it issues now. The test
 * server runs on Effect's TestClock, so wall-clock time would be wrong.
 */
export const serverNow = (fixture: Fixture) => Effect.map(issueToken(fixture), (token) => decodeJwt(token).payload.iat as number)

// ---------------------------------------------------------------------------------------------
// Service calls

/** `/service/{profile}/{env}/json/{uuid}` of a fixture (or of explicit parts). */
export const callPath = (target: { readonly profile: string; readonly environment: string; readonly uuid: string }) =>
  `/service/${target.profile}/${target.environment}/json/${target.uuid}`

/**
 * POSTs to a service-call path. `token` becomes `Authorization: Bearer <token>`; `authorization`
 * sets the header verbatim. The body defaults to `{}` sent as application/json; `body: null` sends none.
 */
export const callService = (
  path: string,
  options: {
    readonly token?: string | undefined
    readonly authorization?: string | undefined
    readonly body?: string | null | undefined
    readonly contentType?: string | undefined
    readonly headers?: Record<string, string> | undefined
  } = {}
) => {
  const authorization = options.authorization ?? (options.token === undefined ? undefined : `Bearer ${options.token}`)
  const body = options.body === undefined ? "{}" : options.body
  return request("POST", path, {
    ...(body === null ? {} : { body, contentType: options.contentType ?? "application/json" }),
    headers: { ...(authorization === undefined ? {} : { authorization }), ...options.headers }
  })
}

export const CHALLENGE = {
  /** No credentials presented (RFC 6750 §3.1: no error code). */
  bare: `Bearer realm="service"`,
  invalidRequest: `Bearer realm="service", error="invalid_request"`,
  invalidToken: `Bearer realm="service", error="invalid_token"`,
  insufficientScope: `Bearer realm="service", error="insufficient_scope"`
} as const

/**
 * An error answer: exact status, a body of exactly `{error, error_description}` with this `error`
 * and a non-empty description, and exactly this `WWW-Authenticate` (or none when undefined).
 */
export const expectServiceError = (
  response: JsonResponse,
  status: number,
  error: string,
  challenge?: string
) => {
  expect({ status: response.status, body: response.body, challenge: response.headers["www-authenticate"] }).toEqual({
    status,
    body: { error, error_description: expect.any(String) },
    challenge
  })
  expect(Object.keys(response.body).sort()).toEqual(["error", "error_description"])
  expect(response.body.error_description.length).toBeGreaterThan(0)
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}

/** 401 invalid_token with the `error="invalid_token"` challenge. */
export const expectInvalidToken = (response: JsonResponse) => expectServiceError(response, 401, "invalid_token", CHALLENGE.invalidToken)

/** The echo handler's answer for a fixture: exactly `{service_uuid, profile, environment, client_id, body}`. */
export const expectEcho = (
  response: JsonResponse,
  fixture: { readonly profile: string; readonly environment: string; readonly uuid: string },
  clientId: string | null,
  body: unknown = {}
) => {
  expect({ status: response.status, body: response.body }).toEqual({
    status: 200,
    body: {
      service_uuid: fixture.uuid,
      profile: fixture.profile,
      environment: fixture.environment,
      client_id: clientId,
      body
    }
  })
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}
