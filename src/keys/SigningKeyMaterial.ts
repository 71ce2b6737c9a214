/**
 * Signing keys as material: generating an RS256 key, reading a PEM (PKCS#8 or PKCS#1) and checking
 * it (RSA, at least 2048 bits), its `kid` (the RFC 7638 thumbprint), its public JWK and the
 * node:crypto public key that verifies. Nothing here knows where keys are stored or when they sign.
 */
import { Effect } from "effect"
import * as Jose from "jose"
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto"
import { readFile } from "node:fs/promises"
import { describeFileError, StartupError } from "../config/StartupError.js"
import { RSA_PUBLIC_EXPONENT } from "../domain/KeyCredential.js"
import type { PublicRsaJwk } from "./SigningKeyStore.js"

export const SIGNING_ALGORITHM = "RS256"

/** The name a generated key had in `server_keys` before keys had their own table (adopted at start). */
export const SIGNING_KEY_NAME = "signing_key"

export interface PublicJwk extends PublicRsaJwk {
  readonly kid: string
  readonly alg: typeof SIGNING_ALGORITHM
  readonly use: "sig"
}

/** A key this instance can sign with. */
export interface SigningKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  /** The protected header of its tokens, `{"alg":"RS256","typ":"JWT","kid":...}`, encoded once. */
  readonly encodedHeader: string
}

/** A key in memory: its schedule times, its public half, and its private half when it may sign. */
export interface HeldKey {
  readonly kid: string
  readonly createdAt: number
  readonly activeFrom: number
  readonly position: number
  readonly jwk: PublicJwk
  readonly publicKey: KeyObject
  readonly signing: SigningKey | undefined
}

export const generatePkcs8 = async () => {
  const { privateKey } = await Jose.generateKeyPair(SIGNING_ALGORITHM, { modulusLength: 2048, extractable: true })
  return Jose.exportPKCS8(privateKey)
}

/** Any PEM RSA private key node:crypto reads (PKCS#8, or PKCS#1 "RSA PRIVATE KEY") as PKCS#8. */
export const toPkcs8 = (pem: string): string =>
  pem.includes("BEGIN PRIVATE KEY")
    ? pem
    : createPrivateKey(pem).export({ type: "pkcs8", format: "pem" }).toString()

export const encodedHeaderOf = (kid: string) =>
  Buffer.from(JSON.stringify({ alg: SIGNING_ALGORITHM, typ: "JWT", kid })).toString("base64url")

export const publicJwkOf = (kid: string, { e, n }: PublicRsaJwk): PublicJwk => ({
  kty: "RSA",
  n,
  e,
  kid,
  alg: SIGNING_ALGORITHM,
  use: "sig"
})

/** A private key, checked (RSA, at least 2048 bits, public exponent 65537), with its kid and public half. */
export const importSigningKey = async (pem: string) => {
  const privateKey = await Jose.importPKCS8(toPkcs8(pem), SIGNING_ALGORITHM, { extractable: true })
  const { kty, n, e } = await Jose.exportJWK(privateKey)
  if (kty !== "RSA" || n === undefined || e === undefined) throw new Error("signing key must be an RSA key")
  if (Buffer.from(n, "base64url").length * 8 < 2048) throw new Error("signing key must have at least 2048 bits")
  if (e !== RSA_PUBLIC_EXPONENT) throw new Error("signing key must have the public exponent 65537")
  const publicJwk: PublicRsaJwk = { kty: "RSA", n, e }
  const kid = await Jose.calculateJwkThumbprint(publicJwk)
  return { kid, publicJwk, privateKey }
}

export const publicKeyOf = (jwk: PublicRsaJwk): KeyObject =>
  // Verification uses node:crypto's synchronous RSA verify: about ten times faster than WebCrypto's.
  createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: "jwk" })

export const heldFromPem = async (
  pem: string,
  times: { createdAt: number; activeFrom: number; position: number }
): Promise<HeldKey> => {
  const { kid, privateKey, publicJwk } = await importSigningKey(pem)
  return {
    kid,
    ...times,
    jwk: publicJwkOf(kid, publicJwk),
    publicKey: publicKeyOf(publicJwk),
    signing: { kid, privateKey, encodedHeader: encodedHeaderOf(kid) }
  }
}

/** The key in SIGNING_KEY_FILE, or a StartupError that says why it cannot be used. */
export const readSigningKeyFile = (file: string) =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (cause) => new StartupError({ message: `cannot read SIGNING_KEY_FILE ${file}: ${describeFileError(cause)}` })
  }).pipe(Effect.flatMap((pem) =>
    Effect.tryPromise({
      try: () => heldFromPem(pem, { createdAt: 0, activeFrom: 0, position: 0 }),
      catch: (cause) =>
        new StartupError({
          message: `SIGNING_KEY_FILE ${file} is not a usable signing key: ${cause instanceof Error ? cause.message : cause}`
        })
    })
  ))

/** A new key, as `KeyService.layerTest` holds one for each server it is built for. */
export const generateHeldKey = (): Promise<HeldKey> =>
  generatePkcs8().then((pem) => heldFromPem(pem, { createdAt: 0, activeFrom: 0, position: 0 }))
