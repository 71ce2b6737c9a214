/**
 * Client credentials as generated and checked: `svc_` + 128 random bits, a 256-bit base64url
 * secret, and only an HMAC-SHA256 digest of the secret stored.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { ClientSecrets, makeClientSecrets } from "../src/catalogue/ClientSecrets.js"
import { KeyEncryption } from "../src/keys/KeyEncryption.js"
import { ServerKeyStore } from "../src/keys/ServerKeyStore.js"

describe("ClientSecrets", () => {
  it.layer(ClientSecrets.layerTest)((it) => {
    it.effect("generates svc_ + 32 hex client ids and base64url secrets of at least 43 characters", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        expect(generated.clientId).toMatch(/^svc_[0-9a-f]{32}$/)
        const secret = Redacted.value(generated.secret)
        expect(secret).toMatch(/^[A-Za-z0-9_-]{43,}$/)
        expect(Buffer.from(secret, "base64url")).toHaveLength(32)
      }))

    it.effect("generates distinct ids, secrets and hashes every time", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const all = yield* Effect.replicateEffect(secrets.generate, 50)
        expect(new Set(all.map((g) => g.clientId)).size).toBe(50)
        expect(new Set(all.map((g) => Redacted.value(g.secret))).size).toBe(50)
        expect(new Set(all.map((g) => g.secretHash)).size).toBe(50)
      }))

    it.effect("keeps the secret redacted", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        const secret = Redacted.value(generated.secret)
        expect(String(generated.secret)).not.toContain(secret)
        expect(JSON.stringify(generated)).not.toContain(secret)
      }))

    it.effect("stores a 64-hex-digit hash that is not the secret", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        const secret = Redacted.value(generated.secret)
        expect(generated.secretHash).toMatch(/^[0-9a-f]{64}$/)
        expect(generated.secretHash).not.toBe(secret)
        expect(generated.secretHash).not.toContain(secret)
        expect(generated.secretHash).not.toBe(Buffer.from(secret, "base64url").toString("hex"))
      }))

    it.effect("matches the right secret only", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        const other = yield* secrets.generate
        const secret = Redacted.value(generated.secret)
        expect(secrets.matches(generated.secret, generated.secretHash)).toBe(true)
        expect(secrets.matches(Redacted.make(secret), generated.secretHash)).toBe(true)
        expect(secrets.matches(other.secret, generated.secretHash)).toBe(false)
        expect(secrets.matches(Redacted.make(`${secret}x`), generated.secretHash)).toBe(false)
        expect(secrets.matches(Redacted.make(secret.slice(0, -1)), generated.secretHash)).toBe(false)
        expect(secrets.matches(Redacted.make(""), generated.secretHash)).toBe(false)
        // The stored hash itself is not a secret that matches.
        expect(secrets.matches(Redacted.make(generated.secretHash), generated.secretHash)).toBe(false)
      }))

    it.effect("does not match an undefined hash (unknown client)", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        expect(secrets.matches(generated.secret, undefined)).toBe(false)
      }))

    it.effect("does not match a malformed stored hash", () =>
      Effect.gen(function*() {
        const secrets = yield* ClientSecrets
        const generated = yield* secrets.generate
        const hash = generated.secretHash
        for (const malformed of [hash.slice(0, 62), `${hash}00`, "", "not-hex", hash.slice(0, 63), `zz${hash.slice(2)}`]) {
          expect(secrets.matches(generated.secret, malformed), malformed).toBe(false)
        }
      }))
  })

  it("hashes under its digest key: another key neither produces nor matches the same hash", () => {
    const first = makeClientSecrets(Buffer.alloc(32, 1))
    const second = makeClientSecrets(Buffer.alloc(32, 2))
    const generated = Effect.runSync(first.generate)
    expect(first.matches(generated.secret, generated.secretHash)).toBe(true)
    expect(second.matches(generated.secret, generated.secretHash)).toBe(false)
  })

  it.effect("instances sharing a key store share the digest key", () =>
    Effect.gen(function*() {
      const store = yield* ServerKeyStore
      const build = Effect.provide(
        ClientSecrets,
        Layer.provide(ClientSecrets.layer, Layer.merge(Layer.succeed(ServerKeyStore, store), KeyEncryption.layerNone))
      )
      const one = yield* build
      const two = yield* build
      const generated = yield* one.generate
      expect(two.matches(generated.secret, generated.secretHash)).toBe(true)
    }).pipe(Effect.provide(ServerKeyStore.layerMemory)))
})
