/**
 * Secrets at rest: with KEY_ENCRYPTION_KEY set, the private signing keys and the credential digest
 * key are stored sealed with AES-256-GCM, as `enc:v1:<iv>:<ciphertext+tag>` (base64url, a random
 * 12-byte IV per value), the value's name (`credential_digest_key`, `signing_key:<kid>`) bound as
 * additional data so that a sealed value cannot be moved onto another.
 *
 * At start (this layer), every stored secret is brought to the configured form in place: plaintext
 * is sealed, values sealed with KEY_ENCRYPTION_KEY_PREVIOUS are sealed again with the new key, and
 * with only KEY_ENCRYPTION_KEY_PREVIOUS set they are opened back to plaintext. A value that cannot
 * be opened stops the start with a line that names the problem (never the key, never the value).
 */
import { Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import { StartupError } from "../config/StartupError.js"
import { ServerKeyStore } from "./ServerKeyStore.js"
import { SigningKeyStore } from "./SigningKeyStore.js"

export const SEALED_PREFIX = "enc:v1:"

export const isSealed = (stored: string) => stored.startsWith(SEALED_PREFIX)

const additionalData = (name: string) => Buffer.from(`service-auth:${name}`, "utf8")

export const seal = (key: Buffer, name: string, plaintext: string): string => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(additionalData(name))
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()])
  return `${SEALED_PREFIX}${iv.toString("base64url")}:${ciphertext.toString("base64url")}`
}

/** The plaintext of a sealed value, or undefined when `key` does not open it (or it is damaged). */
export const open = (key: Buffer, name: string, stored: string): string | undefined => {
  const [iv, sealed] = stored.slice(SEALED_PREFIX.length).split(":")
  if (iv === undefined || sealed === undefined) return undefined
  const bytes = Buffer.from(sealed, "base64url")
  if (bytes.length < 16) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url")).setAAD(additionalData(name))
    decipher.setAuthTag(bytes.subarray(bytes.length - 16))
    return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

export interface KeyEncryptionShape {
  /** The value to store for `plaintext`: sealed with KEY_ENCRYPTION_KEY, or as it is when unset. */
  readonly seal: (name: string, plaintext: string) => string
  /** The plaintext of a stored value, or why it cannot be read (a sentence naming the setting). */
  readonly open: (name: string, stored: string) => Either.Either<Redacted.Redacted<string>, string>
}

export const makeKeyEncryption = (
  current: Option.Option<Buffer>,
  previous: Option.Option<Buffer>
): KeyEncryptionShape & {
  /** The value to store instead of `stored`, when it is not in the configured form. */
  readonly reseal: (name: string, stored: string) => Either.Either<Option.Option<string>, string>
} => {
  const openWith = (name: string, stored: string): Either.Either<{ plaintext: string; byCurrent: boolean }, string> => {
    if (!isSealed(stored)) return Either.right({ plaintext: stored, byCurrent: false })
    if (Option.isNone(current) && Option.isNone(previous)) {
      return Either.left(`${name} is stored encrypted, and KEY_ENCRYPTION_KEY is not set`)
    }
    const byCurrent = Option.isSome(current) ? open(current.value, name, stored) : undefined
    if (byCurrent !== undefined) return Either.right({ plaintext: byCurrent, byCurrent: true })
    const byPrevious = Option.isSome(previous) ? open(previous.value, name, stored) : undefined
    if (byPrevious !== undefined) return Either.right({ plaintext: byPrevious, byCurrent: false })
    return Either.left(
      `KEY_ENCRYPTION_KEY${Option.isSome(previous) ? " (or KEY_ENCRYPTION_KEY_PREVIOUS)" : ""} does not decrypt ${name}: ` +
        "it is not the key it was encrypted with (when changing the key, set the old one as KEY_ENCRYPTION_KEY_PREVIOUS)"
    )
  }
  return {
    seal: (name, plaintext) => Option.isSome(current) ? seal(current.value, name, plaintext) : plaintext,
    open: (name, stored) => Either.map(openWith(name, stored), ({ plaintext }) => Redacted.make(plaintext)),
    reseal: (name, stored) =>
      Either.map(openWith(name, stored), ({ byCurrent, plaintext }) =>
        Option.isSome(current)
          ? byCurrent ? Option.none() : Option.some(seal(current.value, name, plaintext))
          : isSealed(stored)
          ? Option.some(plaintext)
          : Option.none())
  }
}

/** The name a signing key's private half is sealed under. */
export const signingKeyName = (kid: string) => `signing_key:${kid}`

export class KeyEncryption extends Context.Tag("service-auth/KeyEncryption")<KeyEncryption, KeyEncryptionShape>() {
  /** From KEY_ENCRYPTION_KEY(_PREVIOUS), after bringing every stored secret to the configured form. */
  static readonly layer = Layer.effect(
    KeyEncryption,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const encryption = makeKeyEncryption(
        Option.map(config.keyEncryptionKey, Redacted.value),
        Option.map(config.keyEncryptionKeyPrevious, Redacted.value)
      )
      const reseal = (name: string, stored: string) =>
        Either.match(encryption.reseal(name, stored), {
          onLeft: (problem) => Effect.fail(new StartupError({ message: problem })),
          onRight: Effect.succeed
        })
      const serverKeys = yield* ServerKeyStore
      const signingKeys = yield* SigningKeyStore
      const changed = (yield* serverKeys.reseal(reseal)) + (yield* signingKeys.reseal((kid, stored) => reseal(signingKeyName(kid), stored)))
      if (changed > 0) {
        yield* Effect.logInfo(
          Option.isSome(config.keyEncryptionKey)
            ? `secrets at rest: ${changed} stored key(s) encrypted with KEY_ENCRYPTION_KEY`
            : `secrets at rest: ${changed} stored key(s) decrypted (KEY_ENCRYPTION_KEY is not set)`
        )
      }
      return KeyEncryption.of({ seal: encryption.seal, open: encryption.open })
    })
  )

  /** No encryption: values are stored as they are. */
  static readonly layerNone = Layer.succeed(KeyEncryption, KeyEncryption.of(makeKeyEncryption(Option.none(), Option.none())))
}
