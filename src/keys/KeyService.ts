/**
 * The RS256 keys that sign access tokens and verify them, and the JWKS (RFC 7517) that publishes
 * their public halves. A `kid` is the key's RFC 7638 thumbprint.
 *
 * Without SIGNING_KEY_FILE the keys live in the database (`SigningKeyStore`) and rotate on the
 * schedule of `KeySchedule.ts`: `POST /admin/keys/rotate` (or KEY_ROTATION_DAYS) adds a key that
 * is published at once and signs from KEY_PUBLISH_DELAY_S later. Each instance holds the key set in
 * memory, so signing and the fast lane's synchronous verification never wait for the database; the
 * switch to a new key happens on every instance at its stored `active_from`, read from Effect's
 * `Clock`. The set is reloaded every 2 s, and on demand (one load at a time, at least 200 ms apart)
 * when a token names a kid this instance does not hold or the JWKS is asked for, so a key rotated
 * on another instance with no publication delay verifies here from its first token.
 *
 * With SIGNING_KEY_FILE, that one key signs; rotation is the operator's (replace the file, restart).
 */
import { Clock, Context, Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import type { KeyObject } from "node:crypto"
import { AppConfig } from "../config/AppConfig.js"
import { StartupError } from "../config/StartupError.js"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { Conflict, type StorageUnavailable } from "../domain/Errors.js"
import { AuditTrail } from "../storage/AuditTrail.js"
import { ServerKeyStore } from "./ServerKeyStore.js"
import { type SealedKey, SigningKeyStore } from "./SigningKeyStore.js"
import { KeyEncryption, signingKeyName } from "./KeyEncryption.js"
import { infoOf, type KeyInfo, makeKeyHolder, publishedKeys, ringOf, signingKeyOf, timesOf, verificationKeyOf } from "./KeyRing.js"
import { makeKeyReload } from "./KeyReload.js"
import { makeKeyRotation } from "./KeyRotation.js"
import { schedule } from "./KeySchedule.js"
import {
  generateHeldKey,
  generatePkcs8,
  type HeldKey,
  importSigningKey,
  type PublicJwk,
  readSigningKeyFile,
  SIGNING_KEY_NAME,
  type SigningKey
} from "./SigningKeyMaterial.js"

export interface KeyServiceShape {
  /** The key that signs a token issued at `nowMillis`. */
  readonly signingKeyAt: (nowMillis: number) => SigningKey
  /** The public key `kid` names while it verifies (next, active, retiring); "retired" after. */
  readonly verificationKeyAt: (kid: string, nowMillis: number) => KeyObject | "retired" | undefined
  /** Reloads the key set once when a token names a kid this instance does not hold (rate-limited). */
  readonly learn: (kid: string) => Effect.Effect<void>
  /** The published keys (next, active, retiring) now, reloaded first unless a load ran just before. */
  readonly jwks: Effect.Effect<{ readonly keys: ReadonlyArray<PublicJwk> }>
  /** Every key with its status, newest first, as stored. */
  readonly list: Effect.Effect<ReadonlyArray<KeyInfo>, StorageUnavailable>
  /** Schedules a new key: published now, signing after KEY_PUBLISH_DELAY_S; `key.rotated` in the audit trail. */
  readonly rotate: (actor: AdminActorShape) => Effect.Effect<KeyInfo, Conflict | StorageUnavailable>
}

/** One key that never rotates (SIGNING_KEY_FILE, tests); `rotate` says why not. */
const fixedKeys = (key: HeldKey, whyNoRotation: string): KeyServiceShape => {
  const ring = ringOf([key])
  return {
    signingKeyAt: () => key.signing!,
    verificationKeyAt: (kid) => (kid === key.kid ? key.publicKey : undefined),
    learn: () => Effect.void,
    jwks: Effect.succeed({ keys: [key.jwk] }),
    list: Effect.map(Clock.currentTimeMillis, (now) => [infoOf(ring.ordered[0]!, now)]),
    rotate: () => Effect.fail(new Conflict({ description: whyNoRotation }))
  }
}

/** Our kids are SHA-256 thumbprints: anything else is refused without asking the database. */
const KID = /^[A-Za-z0-9_-]{43}$/
/** The JWKS answers from memory rather than wait longer than this for a reload. */
const JWKS_RELOAD_PATIENCE = Duration.millis(300)

const storedKeys = Effect.gen(function*() {
  const config = yield* AppConfig
  const store = yield* SigningKeyStore
  const serverKeys = yield* ServerKeyStore
  const audit = yield* AuditTrail
  const encryption = yield* KeyEncryption

  /** A key sealed for storage; its times are given when it is inserted. */
  const sealedKey = (pem: string) =>
    Effect.promise(() => importSigningKey(pem)).pipe(Effect.map(({ kid, publicJwk }): SealedKey => ({
      kid,
      publicJwk,
      privateKey: encryption.seal(signingKeyName(kid), pem)
    })))

  // The first key: the generated key of earlier versions when there is one (same kid, its tokens
  // still verify), otherwise a new one; whichever instance commits first wins, the others read it.
  if ((yield* store.list).length === 0) {
    const now = yield* Clock.currentTimeMillis
    const legacy = yield* serverKeys.get(SIGNING_KEY_NAME)
    const pem = Option.isSome(legacy)
      ? yield* Either.match(encryption.open(SIGNING_KEY_NAME, Redacted.value(legacy.value)), {
        onLeft: (problem) => Effect.fail(new StartupError({ message: problem })),
        onRight: (pem) => Effect.succeed(Redacted.value(pem))
      })
      : yield* Effect.promise(generatePkcs8)
    const first = { ...(yield* sealedKey(pem)), createdAt: new Date(now), activeFrom: new Date(now) }
    yield* store.insertIf((keys) => Either.right(keys.length === 0 ? Option.some(first) : Option.none()))
  }
  yield* serverKeys.remove(SIGNING_KEY_NAME)

  const holder = makeKeyHolder(encryption)
  const { exclusively, reload, reloadOnDemand, reloadPeriodically } = yield* makeKeyReload(Effect.flatMap(store.list, holder.adopt))

  yield* reload
  if (holder.current().ordered.length === 0) {
    return yield* new StartupError({ message: "no stored signing key can be opened with KEY_ENCRYPTION_KEY" })
  }
  yield* Effect.forkScoped(reloadPeriodically)

  const list = Effect.gen(function*() {
    const stored = yield* store.list
    yield* exclusively(holder.adopt(stored))
    const now = yield* Clock.currentTimeMillis
    return schedule(stored.map(timesOf)).map((scheduled) => infoOf(scheduled, now)).reverse()
  })

  const rotation = makeKeyRotation({
    store,
    audit,
    publishDelayMillis: config.keyPublishDelaySeconds * 1000,
    sealedKey,
    ring: holder.current,
    reload,
    list
  })
  if (Option.isSome(config.keyRotationDays)) yield* Effect.forkScoped(rotation.rotateAutomatically(config.keyRotationDays.value))

  return KeyService.of({
    signingKeyAt: (nowMillis) => signingKeyOf(holder.current(), nowMillis),
    verificationKeyAt: (kid, nowMillis) => verificationKeyOf(holder.current(), kid, nowMillis),
    learn: (kid) => (holder.current().byKid.has(kid) || !KID.test(kid) ? Effect.void : reloadOnDemand),
    jwks: Effect.gen(function*() {
      yield* Effect.timeoutOption(reloadOnDemand, JWKS_RELOAD_PATIENCE)
      return { keys: publishedKeys(holder.current(), yield* Clock.currentTimeMillis) }
    }),
    list,
    rotate: rotation.rotate
  })
})

export class KeyService extends Context.Tag("service-auth/KeyService")<KeyService, KeyServiceShape>() {
  /** SIGNING_KEY_FILE's key, or the rotating keys kept in the database. */
  static readonly layer = Layer.scoped(
    KeyService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isNone(config.signingKeyFile)) return yield* storedKeys
      const key = yield* readSigningKeyFile(config.signingKeyFile.value)
      const now = yield* Clock.currentTimeMillis
      return fixedKeys(
        { ...key, createdAt: now, activeFrom: now },
        "The signing key comes from SIGNING_KEY_FILE: to rotate it, replace the file and restart every instance"
      )
    })
  )

  /** A fixed key, generated for each server built (no two test servers share one). */
  static readonly layerTest = Layer.effect(
    KeyService,
    Effect.promise(generateHeldKey).pipe(
      Effect.map((key) => fixedKeys(key, "The test key does not rotate"))
    )
  )
}

/** The fixed key of `layerTest` (for tests that sign tokens themselves). */
export const testSigningKey = Effect.gen(function*() {
  const keys = yield* KeyService
  const { kid, privateKey } = keys.signingKeyAt(0)
  const publicJwk = (yield* keys.jwks).keys.find((key) => key.kid === kid)!
  return { kid, privateKey, publicJwk }
})
