/**
 * Generation and checking of client credentials.
 *
 * A client id is `svc_` + 128 random bits; a secret is 256 random bits, base64url. Secrets are
 * stored only as HMAC-SHA256 under a server key: with 256 bits of entropy a slow password hash adds
 * nothing but cost (it would cap the token endpoint at ~20 requests/s). Checking is constant-time,
 * and an unknown client id is checked against a dummy digest so it costs what a wrong secret costs.
 */
import { Context, Effect, Either, Layer, Redacted } from "effect"
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto"
import type { ClientId } from "../domain/Identifiers.js"
import { StartupError } from "../config/StartupError.js"
import { ServerKeyStore } from "../keys/ServerKeyStore.js"
import { KeyEncryption } from "../keys/KeyEncryption.js"

export interface GeneratedCredential {
  readonly clientId: ClientId
  readonly secret: Redacted.Redacted<string>
  readonly secretHash: string
}

export interface ClientSecretsShape {
  readonly generate: Effect.Effect<GeneratedCredential>
  /** Whether `secret` matches `secretHash`; `undefined` (unknown client) is checked at the same cost and fails. */
  readonly matches: (secret: Redacted.Redacted<string>, secretHash: string | undefined) => boolean
  /**
   * The AES-256 key that seals the static upstream headers' values (`UpstreamHeaders`), derived from
   * the digest key (HKDF-SHA256): stored nowhere, sealed at rest with it under KEY_ENCRYPTION_KEY,
   * carried by an export with it.
   */
  readonly headerSealingKey: Buffer
}

/** Its name in `server_keys`. */
export const DIGEST_KEY_NAME = "credential_digest_key"

export const makeClientSecrets = (digestKey: Buffer): ClientSecretsShape => {
  const digest = (secret: string) => createHmac("sha256", digestKey).update(secret, "utf8").digest()
  const dummy = digest(randomBytes(32).toString("base64url"))
  return {
    generate: Effect.sync(() => {
      const secret = randomBytes(32).toString("base64url")
      return {
        clientId: `svc_${randomBytes(16).toString("hex")}` as ClientId,
        secret: Redacted.make(secret),
        secretHash: digest(secret).toString("hex")
      }
    }),
    matches: (secret, secretHash) => {
      const presented = digest(Redacted.value(secret))
      const stored = secretHash === undefined ? undefined : Buffer.from(secretHash, "hex")
      const comparable = stored !== undefined && stored.length === presented.length
      const equal = timingSafeEqual(presented, comparable ? stored : dummy)
      return comparable && equal
    },
    headerSealingKey: Buffer.from(hkdfSync("sha256", digestKey, Buffer.alloc(0), "service-auth:upstream-headers", 32))
  }
}

export class ClientSecrets extends Context.Tag("service-auth/ClientSecrets")<ClientSecrets, ClientSecretsShape>() {
  /** Digest key shared by every instance through the database (sealed there when KEY_ENCRYPTION_KEY is set). */
  static readonly layer = Layer.effect(
    ClientSecrets,
    Effect.gen(function*() {
      const store = yield* ServerKeyStore
      const encryption = yield* KeyEncryption
      const stored = yield* store.getOrCreate(
        DIGEST_KEY_NAME,
        async () => encryption.seal(DIGEST_KEY_NAME, randomBytes(32).toString("base64url"))
      )
      const key = yield* Either.match(encryption.open(DIGEST_KEY_NAME, Redacted.value(stored)), {
        onLeft: (problem) => Effect.die(new StartupError({ message: problem })),
        onRight: Effect.succeed
      })
      return makeClientSecrets(Buffer.from(Redacted.value(key), "base64url"))
    }).pipe(Effect.orDie)
  )

  /** A fixed digest key, for tests. */
  static readonly layerTest = Layer.sync(ClientSecrets, () => makeClientSecrets(Buffer.alloc(32, 7)))
}
