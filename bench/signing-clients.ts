/**
 * The bench's clients that sign each request: DPoP proofs (RFC 9449) for calls with a DPoP-bound
 * token, and `private_key_jwt` client assertions (RFC 7523) for tokens of a key credential. Every
 * request autocannon sends is made afresh (a new `jti`, the current `iat`), since the server refuses
 * a proof or an assertion it has seen; each is signed with ES256 here, synchronously, as a real
 * client signs each one. So the load generator pays for a signature per request, the server for
 * its verification (and for remembering the `jti`).
 */
import { createHash, generateKeyPairSync, type JsonWebKey, type KeyObject, randomUUID, sign } from "node:crypto"

export interface SigningKey {
  readonly privateKey: KeyObject
  /** The public JWK (kty, crv, x, y). */
  readonly jwk: JsonWebKey
}

/** A fresh EC P-256 key pair (ES256: what oauth4webapi signs DPoP proofs with by default). */
export const es256Key = (): SigningKey => {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
  return { privateKey, jwk: publicKey.export({ format: "jwk" }) }
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

const signed = (key: SigningKey, header: Record<string, unknown>, payload: Record<string, unknown>) => {
  const input = `${base64url(header)}.${base64url(payload)}`
  const signature = sign("sha256", Buffer.from(input), { key: key.privateKey, dsaEncoding: "ieee-p1363" })
  return `${input}.${signature.toString("base64url")}`
}

const nowSeconds = () => Math.floor(Date.now() / 1000)

/** A DPoP proof for `POST htu`; with `accessToken`, its `ath`. */
export const dpopProof = (key: SigningKey, htu: string, accessToken?: string) =>
  signed(key, { typ: "dpop+jwt", alg: "ES256", jwk: key.jwk }, {
    htm: "POST",
    htu,
    iat: nowSeconds(),
    jti: randomUUID(),
    ...(accessToken === undefined ? {} : { ath: createHash("sha256").update(accessToken).digest("base64url") })
  })

/** A client assertion of `clientId` for the issuer `audience`, good for a minute. */
export const clientAssertion = (key: SigningKey, clientId: string, audience: string) => {
  const iat = nowSeconds()
  return signed(key, { alg: "ES256" }, { iss: clientId, sub: clientId, aud: audience, jti: randomUUID(), iat, exp: iat + 60 })
}
