/**
 * The RS256 key that signs access tokens, and the JWKS (RFC 7517) that publishes its public half.
 * The `kid` is the key's RFC 7638 thumbprint. The key comes from SIGNING_KEY_FILE (PKCS#8 PEM) or,
 * when unset, is generated once and kept in the database so that restarts and every instance sign
 * with the same key.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import * as Jose from "jose"
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto"
import { readFile } from "node:fs/promises"
import { AppConfig } from "../AppConfig.js"
import { describeFileError, StartupError } from "../StartupError.js"
import { ServerKeyStore } from "../storage/ServerKeyStore.js"

export const SIGNING_ALGORITHM = "RS256"

/** The generated key's name in `server_keys`. */
export const SIGNING_KEY_NAME = "signing_key"

export interface PublicJwk extends Jose.JWK {
  readonly kid: string
  readonly kty: string
  readonly alg: typeof SIGNING_ALGORITHM
  readonly use: "sig"
}

export interface KeyServiceShape {
  readonly kid: string
  readonly privateKey: CryptoKey
  /** Verification keys by kid. Only keys held here ever verify a token. */
  readonly verificationKey: (kid: string) => KeyObject | undefined
  readonly jwks: { readonly keys: ReadonlyArray<PublicJwk> }
}

const generatePkcs8 = async () => {
  const { privateKey } = await Jose.generateKeyPair(SIGNING_ALGORITHM, { modulusLength: 2048, extractable: true })
  return Jose.exportPKCS8(privateKey)
}

/** Any PEM RSA private key node:crypto reads (PKCS#8, or PKCS#1 "RSA PRIVATE KEY") as PKCS#8. */
const toPkcs8 = (pem: string): string =>
  pem.includes("BEGIN PRIVATE KEY")
    ? pem
    : createPrivateKey(pem).export({ type: "pkcs8", format: "pem" }).toString()

export const fromPkcs8 = async (pem: string): Promise<KeyServiceShape> => {
  const privateKey = await Jose.importPKCS8(toPkcs8(pem), SIGNING_ALGORITHM, { extractable: true })
  const { kty, n, e } = await Jose.exportJWK(privateKey)
  if (kty !== "RSA" || n === undefined || e === undefined) throw new Error("signing key must be an RSA key")
  if (Buffer.from(n, "base64url").length * 8 < 2048) throw new Error("signing key must have at least 2048 bits")
  const publicJwk = { kty, n, e }
  const kid = await Jose.calculateJwkThumbprint(publicJwk)
  // Verification uses node:crypto's synchronous RSA verify: about ten times faster than WebCrypto's.
  const publicKey = createPublicKey({ key: publicJwk, format: "jwk" })
  return {
    kid,
    privateKey,
    verificationKey: (candidate) => (candidate === kid ? publicKey : undefined),
    jwks: { keys: [{ ...publicJwk, kid, alg: SIGNING_ALGORITHM, use: "sig" }] }
  }
}

/** The key in SIGNING_KEY_FILE, or a StartupError that says why it cannot be used. */
export const readSigningKeyFile = (file: string) =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (cause) => new StartupError({ message: `cannot read SIGNING_KEY_FILE ${file}: ${describeFileError(cause)}` })
  }).pipe(Effect.flatMap((pem) =>
    Effect.tryPromise({
      try: () => fromPkcs8(pem),
      catch: (cause) =>
        new StartupError({
          message: `SIGNING_KEY_FILE ${file} is not a usable signing key: ${cause instanceof Error ? cause.message : cause}`
        })
    })
  ))

export class KeyService extends Context.Tag("service-auth/KeyService")<KeyService, KeyServiceShape>() {
  static readonly layer = Layer.effect(
    KeyService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isSome(config.signingKeyFile)) return yield* readSigningKeyFile(config.signingKeyFile.value)
      const store = yield* ServerKeyStore
      const pem = yield* store.getOrCreate(SIGNING_KEY_NAME, generatePkcs8)
      return yield* Effect.promise(() => fromPkcs8(Redacted.value(pem)))
    })
  )

  /** A key generated once per process: deterministic within a test run, and fast after the first. */
  static readonly layerTest = Layer.effect(KeyService, Effect.promise(() => (testKey ??= generatePkcs8().then(fromPkcs8))))
}

let testKey: Promise<KeyServiceShape> | undefined
