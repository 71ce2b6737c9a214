/**
 * Key credentials: a credential whose client proves itself with a signature
 * (`private_key_jwt`, RFC 7523) instead of a shared secret. An operator gives its public key as a
 * JWK: RSA of 2048 to 16384 bits with the public exponent 65537, EC P-256 or Ed25519, public
 * members only, each member in its one canonical encoding and no weak key (`weakKeyProblem`).
 *
 * A credential keeps one verifier in storage (`secret_hash`): for a secret, the HMAC digest of the
 * secret (64 hexadecimal digits); for a key, `jwk:` followed by the public JWK as JSON (its required
 * members and `kid`). The two never look alike: a secret checked against a key's verifier fails, as
 * an assertion checked against a secret's does. Keeping both in one column lets the catalogue, its
 * cache, export and import carry key credentials without a second path.
 */
import { createPublicKey, type KeyObject } from "node:crypto"
import { Either, Schema } from "effect"
import { sha256Base64url } from "./Sha256.js"

/** The algorithms a client's key may sign with, per key type: asymmetric only, never `none` or HMAC. */
export const ALLOWED_ALGORITHMS: Readonly<Record<PublicJwk["kty"], ReadonlyArray<string>>> = {
  RSA: ["RS256", "PS256"],
  EC: ["ES256"],
  OKP: ["EdDSA"]
}

/** Every algorithm accepted for client assertions and DPoP proofs (the metadata lists them). */
export const SIGNING_ALGORITHMS: ReadonlyArray<string> = ["RS256", "PS256", "ES256", "EdDSA"]

/** A public key as stored and verified: the members RFC 7638 requires, and its `kid`. */
export type PublicJwk = KeyMembers & { readonly kid: string }

/** The members RFC 7638 requires of each key type. */
export type KeyMembers =
  | { readonly kty: "RSA"; readonly n: string; readonly e: string }
  | { readonly kty: "EC"; readonly crv: "P-256"; readonly x: string; readonly y: string }
  | { readonly kty: "OKP"; readonly crv: "Ed25519"; readonly x: string }

/** What the admin API shows of a key credential's key. */
export const PublicKeyInfo = Schema.Struct({
  kty: Schema.Literal("RSA", "EC", "OKP").annotations({ description: "The key type." }),
  kid: Schema.String.annotations({ description: "The JWK's kid, or its thumbprint when it had none." }),
  thumbprint: Schema.String.annotations({ description: "The key's RFC 7638 SHA-256 thumbprint, base64url." })
}).annotations({ identifier: "PublicKeyInfo" })
export type PublicKeyInfo = typeof PublicKeyInfo.Type

/** Members of a private key (RFC 7518 §6.3.2, §6.2.2, RFC 8037) and of a symmetric one. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] as const

const BASE64URL = /^[A-Za-z0-9_-]+$/
const KID = /^[\x21-\x7e]{1,128}$/

const text = (value: unknown): value is string => typeof value === "string" && BASE64URL.test(value)

/** The RFC 7638 thumbprint (SHA-256, base64url) of a public key. */
export const jwkThumbprint = (jwk: KeyMembers): string => thumbprintOf(canonicalJwk(jwk))

/** A key's required members as RFC 7638 orders them (the JSON its thumbprint hashes): one text per key. */
export const canonicalJwk = (jwk: KeyMembers): string => {
  const required = jwk.kty === "RSA"
    ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
    : jwk.kty === "EC"
    ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }
    : { crv: jwk.crv, kty: jwk.kty, x: jwk.x }
  return JSON.stringify(required)
}

/** The thumbprint of a key given as `canonicalJwk`'s text. */
export const thumbprintOf = (canonical: string): string => sha256Base64url(canonical)

/**
 * Checks what an operator sent as a public key. Left with a message that names what is wrong (never
 * the key material itself).
 */
export const parsePublicJwk = (input: unknown): Either.Either<PublicJwk, string> =>
  Either.flatMap(
    publicJwkMembers(input),
    ({ kid, members }) => Either.map(importPublicKey(members), () => ({ ...members, kid: kid ?? jwkThumbprint(members) }))
  )

/**
 * `parsePublicJwk`'s checks of the JWK's members, in its order, without importing the key (which
 * `importPublicKey` does): what a caller that keeps imported keys (`ImportedKeys`) checks every time.
 */
export const publicJwkMembers = (
  input: unknown
): Either.Either<{ readonly members: KeyMembers; readonly kid: string | undefined }, string> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return Either.left("public_key must be a JWK object")
  const jwk = input as Record<string, unknown>
  if (PRIVATE_MEMBERS.some((member) => member in jwk)) {
    return Either.left("public_key must hold public members only (no d, p, q, dp, dq, qi, oth or k)")
  }
  if (jwk.kid !== undefined && (typeof jwk.kid !== "string" || !KID.test(jwk.kid))) {
    return Either.left("public_key.kid must be 1-128 visible ASCII characters")
  }
  if (jwk.use !== undefined && jwk.use !== "sig") return Either.left("public_key.use must be sig when present")
  let key: KeyMembers
  if (jwk.kty === "RSA" && text(jwk.n) && text(jwk.e)) key = { kty: "RSA", n: jwk.n, e: jwk.e }
  else if (jwk.kty === "EC" && jwk.crv === "P-256" && text(jwk.x) && text(jwk.y)) key = { kty: "EC", crv: "P-256", x: jwk.x, y: jwk.y }
  else if (jwk.kty === "OKP" && jwk.crv === "Ed25519" && text(jwk.x)) key = { kty: "OKP", crv: "Ed25519", x: jwk.x }
  else return Either.left("public_key must be an RSA, EC P-256 or Ed25519 public JWK")
  const weak = weakKeyProblem(key)
  if (weak !== undefined) return Either.left(weak)
  return Either.right({ members: key, kid: typeof jwk.kid === "string" ? jwk.kid : undefined })
}

/** The only RSA public exponent accepted: 65537, in its one encoding (RFC 7518 §6.3.1.2). */
export const RSA_PUBLIC_EXPONENT = "AQAB"
/** The largest RSA modulus accepted, in bits (OpenSSL verifies no larger). */
export const RSA_MAX_BITS = 16_384

/** 2^255 - 19, the field prime of Ed25519. */
const ED25519_P = (1n << 255n) - 19n
/** The points of small order (1, 2, 4, 8) on Ed25519, encoded with either sign of x. */
const ED25519_SMALL_ORDER = new Set([
  "0100000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000080",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0000000000000000000000000000000000000000000000000000000000000080",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa"
])

/**
 * What makes a key one that others than its holder could sign with, or a second encoding of a key:
 * an RSA exponent other than 65537 (with e = 1 the "signature" is the padded hash itself), an even
 * or zero-padded modulus, EC or Ed25519 coordinates of another length than 32 bytes, an Ed25519
 * point of small order or with y not below p. Undefined for a key without any. (EC points off the
 * curve are refused when the key is imported.)
 */
const weakKeyProblem = (key: KeyMembers): string | undefined => {
  if (key.kty === "RSA") {
    if (key.e !== RSA_PUBLIC_EXPONENT) return "public_key.e must be AQAB (the public exponent 65537)"
    const modulus = Buffer.from(key.n, "base64url")
    if (modulus.length === 0 || modulus[0] === 0) return "public_key.n must be the modulus without leading zero bytes"
    if (modulus.length * 8 > RSA_MAX_BITS) return `public_key must be an RSA key of at most ${RSA_MAX_BITS} bits`
    if ((modulus[modulus.length - 1]! & 1) === 0) return "public_key.n must be an odd modulus"
    return undefined
  }
  const coordinates = key.kty === "EC" ? [["x", key.x], ["y", key.y]] as const : [["x", key.x]] as const
  for (const [name, value] of coordinates) {
    if (value.length !== 43 || Buffer.from(value, "base64url").length !== 32) return `public_key.${name} must be 32 bytes in base64url`
  }
  if (key.kty === "OKP") {
    const point = Buffer.from(key.x, "base64url")
    const y = BigInt(`0x${Buffer.from(point).reverse().toString("hex")}`) & ((1n << 255n) - 1n)
    if (y >= ED25519_P || ED25519_SMALL_ORDER.has(point.toString("hex"))) return "public_key.x must be an Ed25519 point of the main group"
  }
  return undefined
}

/**
 * The key of checked members, imported: Left when it is not a valid public key, or an RSA key under
 * 2048 bits or with another exponent than 65537 (checked again on the key itself).
 */
export const importPublicKey = (key: KeyMembers): Either.Either<KeyObject, string> => {
  try {
    const imported = createPublicKey({ key: key as never, format: "jwk" })
    if (key.kty === "RSA" && (imported.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) {
      return Either.left("public_key must be an RSA key of at least 2048 bits")
    }
    if (key.kty === "RSA" && imported.asymmetricKeyDetails?.publicExponent !== 65537n) {
      return Either.left("public_key.e must be AQAB (the public exponent 65537)")
    }
    return Either.right(imported)
  } catch {
    return Either.left("public_key is not a valid public key")
  }
}

/**
 * A PEM public key (`-----BEGIN PUBLIC KEY-----`, SPKI) as a JWK: what the editor and the CLI accept
 * besides a JWK. Left when it is not one.
 */
export const pemToJwk = (pem: string): Either.Either<Record<string, unknown>, string> => {
  if (/PRIVATE KEY/.test(pem)) return Either.left("the PEM holds a private key: give the public key only")
  try {
    return Either.right(createPublicKey({ key: pem, format: "pem" }).export({ format: "jwk" }) as Record<string, unknown>)
  } catch {
    return Either.left("not a PEM public key")
  }
}

const KEY_VERIFIER_PREFIX = "jwk:"

/** The verifier stored for a key credential. */
export const keyVerifier = (jwk: PublicJwk): string => `${KEY_VERIFIER_PREFIX}${JSON.stringify(jwk)}`

/** Whether a stored verifier is a key's (not a secret's digest). */
export const isKeyVerifier = (verifier: string): boolean => verifier.startsWith(KEY_VERIFIER_PREFIX)

/** The key of a key credential's verifier; undefined for a secret's digest (or a verifier that is not a key). */
export const verifierKey = (verifier: string): PublicJwk | undefined => {
  if (!isKeyVerifier(verifier)) return undefined
  try {
    const parsed = parsePublicJwk(JSON.parse(verifier.slice(KEY_VERIFIER_PREFIX.length)))
    return Either.getOrUndefined(parsed)
  } catch {
    return undefined
  }
}

/** What the admin API shows of a credential's key; undefined for a secret credential. */
export const publicKeyInfo = (verifier: string | null | undefined): PublicKeyInfo | undefined => {
  const key = verifier == null ? undefined : verifierKey(verifier)
  return key === undefined ? undefined : { kty: key.kty, kid: key.kid, thumbprint: jwkThumbprint(key) }
}
