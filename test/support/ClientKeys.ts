/**
 * Client key pairs for key credentials (private_key_jwt) and DPoP proofs, and the hand-made JWTs
 * that the refusal cases need.
 */
import { Effect } from "effect"
import { createHash, createHmac, randomUUID } from "node:crypto"
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"
import { admin, uniqueName } from "../../src/testing.js"

export type KeyKind = "RSA" | "EC" | "Ed25519"

export interface ClientKey {
  readonly alg: "RS256" | "ES256" | "EdDSA"
  readonly privateKey: CryptoKey
  readonly publicJwk: JWK
}

const ALG = { RSA: "RS256", EC: "ES256", Ed25519: "EdDSA" } as const

export const clientKey = (kind: KeyKind): Promise<ClientKey> =>
  generateKeyPair(ALG[kind], { extractable: true, ...(kind === "Ed25519" ? { crv: "Ed25519" } : {}) }).then(
    async ({ privateKey, publicKey }) => ({ alg: ALG[kind], privateKey, publicJwk: await exportJWK(publicKey) })
  )

export const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/**
 * A client assertion (RFC 7523 §3) with defaults that pass at `nowMillis` (the server's clock: in
 * tests, the TestClock); `claims` overrides or removes (undefined) them.
 */
export const assertion = (
  key: ClientKey,
  clientId: string,
  audience: unknown,
  claims: Record<string, unknown> = {},
  nowMillis: number = Date.now()
) => {
  const now = Math.floor(nowMillis / 1000)
  const payload = Object.fromEntries(
    Object.entries({ iss: clientId, sub: clientId, aud: audience, jti: randomUUID(), iat: now, exp: now + 60, ...claims })
      .filter(([, value]) => value !== undefined)
  )
  return new SignJWT(payload).setProtectedHeader({ alg: key.alg }).sign(key.privateKey)
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** An unsigned JWT (`alg` `none`). */
export const unsignedJwt = (payload: Record<string, unknown>) => `${b64({ alg: "none", typ: "JWT" })}.${b64(payload)}.`

/** A JWT "signed" with HS256 under `secret` (the public key as a shared secret: the algorithm-confusion attack). */
export const hmacJwt = (payload: Record<string, unknown>, secret: string) => {
  const input = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(payload)}`
  return `${input}.${createHmac("sha256", secret).update(input).digest("base64url")}`
}

/** A profile, an environment and an oauth service, without credentials. */
export const createService = (body: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const profile = uniqueName("keys")
    const environment = "production"
    yield* admin.put(`/admin/profiles/${profile}`)
    yield* admin.put(`/admin/profiles/${profile}/environments/${environment}`)
    const service = yield* admin.post(`/admin/profiles/${profile}/environments/${environment}/services`, {
      name: "billing",
      auth_type: "oauth",
      ...body
    })
    const uuid: string = service.body.uuid
    return { profile, environment, uuid, servicePath: `/admin/profiles/${profile}/environments/${environment}/services/${uuid}` }
  })

export type ServiceFixture = Effect.Effect.Success<ReturnType<typeof createService>>

/** Adds a key credential through the admin API. */
export const addKeyCredential = (service: ServiceFixture, publicKey: unknown) =>
  admin.post(`${service.servicePath}/credentials`, { public_key: publicKey })

/** The token request's target fields. */
export const targetOf = (service: ServiceFixture) => ({
  grant_type: "client_credentials",
  profile: service.profile,
  environment: service.environment,
  service_uuid: service.uuid
})

/** A DPoP proof (RFC 9449 §4.2) by `key` at `nowMillis`; `claims` and `header` override or remove (undefined). */
export const dpopProof = async (
  key: ClientKey,
  htu: string,
  nowMillis: number,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {}
) => {
  const payload = Object.fromEntries(
    Object.entries({ htm: "POST", htu, iat: Math.floor(nowMillis / 1000), jti: randomUUID(), ...claims })
      .filter(([, value]) => value !== undefined)
  )
  const protectedHeader = Object.fromEntries(
    Object.entries({ typ: "dpop+jwt", alg: key.alg, jwk: key.publicJwk, ...header }).filter(([, value]) => value !== undefined)
  )
  return new SignJWT(payload).setProtectedHeader(protectedHeader as { alg: string }).sign(key.privateKey)
}

/** The `ath` of an access token (RFC 9449 §4.2). */
export const accessTokenHash = (token: string) => createHash("sha256").update(token).digest("base64url")
