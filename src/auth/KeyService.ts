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
import { Clock, Context, Duration, Effect, Either, Layer, Option, Redacted, Schedule } from "effect"
import * as Jose from "jose"
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto"
import { readFile } from "node:fs/promises"
import { AppConfig } from "../config/AppConfig.js"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, type StorageUnavailable } from "../domain/Errors.js"
import { describeFileError, StartupError } from "../config/StartupError.js"
import { AuditTrail } from "../storage/AuditTrail.js"
import { ServerKeyStore } from "../storage/ServerKeyStore.js"
import {
  type NewSigningKey,
  type PublicRsaJwk,
  SigningKeyStore,
  type StoredSigningKey
} from "../storage/SigningKeyStore.js"
import { KeyEncryption, signingKeyName } from "./KeyEncryption.js"
import { type KeyStatus, schedule, type Scheduled, statusAt, verifiesAt } from "./KeySchedule.js"

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

/** A key as `GET /admin/keys` shows it: times and status, never private material. */
export interface KeyInfo {
  readonly kid: string
  readonly status: KeyStatus
  readonly createdAt: Date
  readonly activeFrom: Date
  readonly supersededAt: Date | null
  readonly retiresAt: Date | null
}

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

/** A key in memory: its schedule times, its public half, and its private half when it may sign. */
interface HeldKey {
  readonly kid: string
  readonly createdAt: number
  readonly activeFrom: number
  readonly position: number
  readonly jwk: PublicJwk
  readonly publicKey: KeyObject
  readonly signing: SigningKey | undefined
}

interface KeyRing {
  readonly byKid: ReadonlyMap<string, Scheduled<HeldKey>>
  /** Schedule order, oldest first. */
  readonly ordered: ReadonlyArray<Scheduled<HeldKey>>
}

const ringOf = (keys: ReadonlyArray<HeldKey>): KeyRing => {
  const ordered = schedule(keys)
  return { ordered, byKid: new Map(ordered.map((scheduled) => [scheduled.key.kid, scheduled])) }
}

const signingKeyOf = (ring: KeyRing, nowMillis: number): SigningKey => {
  for (let index = ring.ordered.length - 1; index >= 0; index--) {
    const { key } = ring.ordered[index]!
    if (key.activeFrom <= nowMillis && key.signing !== undefined) return key.signing
  }
  // Only when this instance's clock is behind every key's start: the oldest key it can sign with.
  return ring.ordered.find(({ key }) => key.signing !== undefined)!.key.signing!
}

const infoOf = (scheduled: Scheduled<HeldKey | StoredTimes>, nowMillis: number): KeyInfo => ({
  kid: scheduled.key.kid,
  status: statusAt(scheduled, nowMillis),
  createdAt: new Date(scheduled.key.createdAt),
  activeFrom: new Date(scheduled.key.activeFrom),
  supersededAt: scheduled.supersededAt === undefined ? null : new Date(scheduled.supersededAt),
  retiresAt: scheduled.retiresAt === undefined ? null : new Date(scheduled.retiresAt)
})

interface StoredTimes {
  readonly kid: string
  readonly createdAt: number
  readonly activeFrom: number
  readonly position: number
}
const timesOf = (key: StoredSigningKey): StoredTimes => ({
  kid: key.kid,
  createdAt: key.createdAt.getTime(),
  activeFrom: key.activeFrom.getTime(),
  position: key.position
})

const generatePkcs8 = async () => {
  const { privateKey } = await Jose.generateKeyPair(SIGNING_ALGORITHM, { modulusLength: 2048, extractable: true })
  return Jose.exportPKCS8(privateKey)
}

/** Any PEM RSA private key node:crypto reads (PKCS#8, or PKCS#1 "RSA PRIVATE KEY") as PKCS#8. */
const toPkcs8 = (pem: string): string =>
  pem.includes("BEGIN PRIVATE KEY")
    ? pem
    : createPrivateKey(pem).export({ type: "pkcs8", format: "pem" }).toString()

const encodedHeaderOf = (kid: string) =>
  Buffer.from(JSON.stringify({ alg: SIGNING_ALGORITHM, typ: "JWT", kid })).toString("base64url")

const publicJwkOf = (kid: string, { e, n }: PublicRsaJwk): PublicJwk => ({ kty: "RSA", n, e, kid, alg: SIGNING_ALGORITHM, use: "sig" })

/** A private key, checked (RSA, at least 2048 bits), with its kid and public half. */
export const importSigningKey = async (pem: string) => {
  const privateKey = await Jose.importPKCS8(toPkcs8(pem), SIGNING_ALGORITHM, { extractable: true })
  const { kty, n, e } = await Jose.exportJWK(privateKey)
  if (kty !== "RSA" || n === undefined || e === undefined) throw new Error("signing key must be an RSA key")
  if (Buffer.from(n, "base64url").length * 8 < 2048) throw new Error("signing key must have at least 2048 bits")
  const publicJwk: PublicRsaJwk = { kty: "RSA", n, e }
  const kid = await Jose.calculateJwkThumbprint(publicJwk)
  return { kid, publicJwk, privateKey }
}

const publicKeyOf = (jwk: PublicRsaJwk): KeyObject =>
  // Verification uses node:crypto's synchronous RSA verify: about ten times faster than WebCrypto's.
  createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: "jwk" })

const heldFromPem = async (
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

/** The actor of an automatic rotation (KEY_ROTATION_DAYS) in the audit trail: no admin token made it. */
const SCHEDULE_ACTOR: AdminActorShape = { name: "key-rotation-schedule", source: "server" }

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
const PERIODIC_RELOAD = Duration.seconds(2)
/** On-demand loads (unknown kids, the JWKS) start at least this far apart: garbage kids cost 5 reads a second at most. */
const ON_DEMAND_SPACING_MILLIS = 200
/** The JWKS answers from memory rather than wait longer than this for a reload. */
const JWKS_RELOAD_PATIENCE = Duration.millis(300)
/** How often KEY_ROTATION_DAYS is checked. */
const AUTOMATIC_ROTATION_CHECK = Duration.minutes(1)

const storedKeys = Effect.gen(function*() {
  const config = yield* AppConfig
  const store = yield* SigningKeyStore
  const serverKeys = yield* ServerKeyStore
  const audit = yield* AuditTrail
  const encryption = yield* KeyEncryption
  const publishDelayMillis = config.keyPublishDelaySeconds * 1000

  const sealedKey = (pem: string, times: { createdAt: number; activeFrom: number }) =>
    Effect.promise(() => importSigningKey(pem)).pipe(Effect.map(({ kid, publicJwk }): NewSigningKey => ({
      kid,
      publicJwk,
      privateKey: encryption.seal(signingKeyName(kid), pem),
      createdAt: new Date(times.createdAt),
      activeFrom: new Date(times.activeFrom)
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
    const first = yield* sealedKey(pem, { createdAt: now, activeFrom: now })
    yield* store.insertIf((keys) => Either.right(keys.length === 0 ? Option.some(first) : Option.none()))
  }
  yield* serverKeys.remove(SIGNING_KEY_NAME)

  /** A stored key in memory; undefined when its kid is not its public key's thumbprint (a damaged row). */
  const hold = async (stored: StoredSigningKey, retired: boolean): Promise<HeldKey | undefined> => {
    if ((await Jose.calculateJwkThumbprint(stored.publicJwk)) !== stored.kid) return undefined
    const times = { createdAt: stored.createdAt.getTime(), activeFrom: stored.activeFrom.getTime(), position: stored.position }
    const publicKey = publicKeyOf(stored.publicJwk)
    const held = { kid: stored.kid, ...times, jwk: publicJwkOf(stored.kid, stored.publicJwk), publicKey }
    if (retired) return { ...held, signing: undefined }
    const pem = encryption.open(signingKeyName(stored.kid), stored.privateKey)
    // Sealed with a KEY_ENCRYPTION_KEY this instance does not have: it still verifies, never signs.
    if (Either.isLeft(pem)) return { ...held, signing: undefined }
    const privateKey = await Jose.importPKCS8(toPkcs8(Redacted.value(pem.right)), SIGNING_ALGORITHM, { extractable: true })
    return { ...held, signing: { kid: stored.kid, privateKey, encodedHeader: encodedHeaderOf(stored.kid) } }
  }

  let ring: KeyRing = ringOf([])
  /** Builds the ring from the stored keys, reusing the keys already held (a kid never changes). */
  const adopt = (stored: ReadonlyArray<StoredSigningKey>) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const retired = new Set(
        schedule(stored.map(timesOf)).filter((s) => !verifiesAt(s, now)).map((s) => s.key.kid)
      )
      const held: Array<HeldKey> = []
      for (const key of stored) {
        const known = ring.byKid.get(key.kid)?.key ?? (yield* Effect.promise(() => hold(key, retired.has(key.kid))))
        if (known !== undefined) held.push(known)
        else yield* Effect.logError(`signing key ${key.kid}: its kid is not its public key's thumbprint; ignored`)
      }
      const next = ringOf(held)
      const unsignable = held.filter((key) => key.signing === undefined && !retired.has(key.kid) && !ring.byKid.has(key.kid))
      if (unsignable.length > 0) {
        yield* Effect.logError(
          `signing keys ${unsignable.map((key) => key.kid).join(", ")} cannot be opened with this instance's ` +
            "KEY_ENCRYPTION_KEY: they verify here but never sign (give every instance the same key)"
        )
      }
      if (held.some((key) => key.signing !== undefined)) ring = next
    })

  const loadLock = yield* Effect.makeSemaphore(1)
  let loadsStarted = 0
  let lastOnDemandAt = Number.NEGATIVE_INFINITY
  const load = Effect.suspend(() => {
    loadsStarted++
    return Effect.flatMap(store.list, adopt)
  })
  const reload = loadLock.withPermits(1)(load)
  // The spacing protects the database, so it runs on real time whatever clock the schedule runs on.
  const spaced = Effect.withClock(Clock.make())(Effect.gen(function*() {
    const wait = lastOnDemandAt + ON_DEMAND_SPACING_MILLIS - (yield* Clock.currentTimeMillis)
    if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
    lastOnDemandAt = yield* Clock.currentTimeMillis
  }))
  /**
   * A load that starts after this call: callers arriving together share one, and on-demand loads
   * start at least the spacing apart (callers wait for their turn), one at a time.
   */
  const reloadOnDemand = Effect.suspend(() => {
    const target = loadsStarted + 1
    return loadLock.withPermits(1)(Effect.suspend(() => (loadsStarted >= target ? Effect.void : Effect.zipRight(spaced, load))))
  }).pipe(Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`)))

  yield* reload
  if (ring.ordered.length === 0) {
    return yield* new StartupError({ message: "no stored signing key can be opened with KEY_ENCRYPTION_KEY" })
  }
  yield* reload.pipe(
    Effect.catchAll((error) => Effect.logDebug(`signing keys: reload failed (${error.description})`)),
    Effect.repeat(Schedule.spaced(PERIODIC_RELOAD)),
    Effect.forkScoped
  )

  /** Inserts a new key when `decide` (under the store's lock, at `now`) says so, then reloads. */
  const rotateWhen = <E>(
    actor: AdminActorShape,
    decide: (scheduled: ReadonlyArray<Scheduled<StoredTimes>>, now: number) => Either.Either<boolean, E>
  ) =>
    Effect.gen(function*() {
      const pem = yield* Effect.promise(generatePkcs8)
      const now = yield* Clock.currentTimeMillis
      const candidate = yield* sealedKey(pem, { createdAt: now, activeFrom: now + publishDelayMillis })
      const inserted = yield* store.insertIf(
        (keys) =>
          Either.map(decide(schedule(keys.map(timesOf)), now), (insert) => (insert ? Option.some(candidate) : Option.none())),
        (key) =>
          audit.record([auditEvent(actor, new Date(now), {
            action: "key.rotated",
            details: { kid: key.kid, active_from: key.activeFrom.toISOString() }
          })])
      )
      yield* reload
      return inserted
    })

  const list = Effect.gen(function*() {
    const stored = yield* store.list
    yield* loadLock.withPermits(1)(adopt(stored))
    const now = yield* Clock.currentTimeMillis
    return schedule(stored.map(timesOf)).map((scheduled) => infoOf(scheduled, now)).reverse()
  })

  /** Why a rotation must wait: a key is already scheduled. */
  const pendingConflict = (scheduled: ReadonlyArray<Scheduled<StoredTimes>>, now: number) => {
    const pending = scheduled.find((s) => statusAt(s, now) === "next")
    return pending === undefined
      ? Option.none()
      : Option.some(
          new Conflict({
            description: `Key ${pending.key.kid} is already scheduled to start signing at ${
              new Date(pending.key.activeFrom).toISOString()
            }; rotate again once it has`
          })
        )
  }

  const rotate = (actor: AdminActorShape) => Effect.gen(function*() {
    // What memory already shows costs no key generation; the store's lock decides the rest.
    const known = pendingConflict(ring.ordered, yield* Clock.currentTimeMillis)
    if (Option.isSome(known)) return yield* known.value
    const rotated = yield* rotateWhen(actor, (scheduled, now) =>
      Option.match(pendingConflict(scheduled, now), { onNone: () => Either.right(true), onSome: Either.left })
    )
    const key = Option.getOrThrow(rotated)
    const info = (yield* list).find((candidate) => candidate.kid === key.kid)
    return info ?? (yield* Effect.dieMessage(`the key ${key.kid} just stored is not listed`))
  })

  if (Option.isSome(config.keyRotationDays)) {
    const maxAgeMillis = config.keyRotationDays.value * 24 * 3600 * 1000
    // Every instance checks; the store's lock makes the first one rotate and the others see its key.
    const due = (scheduled: ReadonlyArray<Scheduled<StoredTimes>>, now: number) =>
      !scheduled.some((s) => statusAt(s, now) === "next") &&
      scheduled.some((s) => statusAt(s, now) === "active" && now - s.key.activeFrom >= maxAgeMillis)
    yield* Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (!due(ring.ordered, now)) return
      const rotated = yield* rotateWhen(SCHEDULE_ACTOR, (scheduled, at) => Either.right(due(scheduled, at)))
      if (Option.isSome(rotated)) {
        yield* Effect.logInfo(`signing key rotated automatically (KEY_ROTATION_DAYS): new key ${rotated.value.kid}`)
      }
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning(`automatic key rotation failed: ${error.description}`)),
      Effect.repeat(Schedule.spaced(AUTOMATIC_ROTATION_CHECK)),
      Effect.forkScoped
    )
  }

  return KeyService.of({
    signingKeyAt: (nowMillis) => signingKeyOf(ring, nowMillis),
    verificationKeyAt: (kid, nowMillis) => {
      const held = ring.byKid.get(kid)
      return held === undefined ? undefined : verifiesAt(held, nowMillis) ? held.key.publicKey : "retired"
    },
    learn: (kid) => (ring.byKid.has(kid) || !KID.test(kid) ? Effect.void : reloadOnDemand),
    jwks: Effect.gen(function*() {
      yield* Effect.timeoutOption(reloadOnDemand, JWKS_RELOAD_PATIENCE)
      const now = yield* Clock.currentTimeMillis
      return { keys: ring.ordered.filter((scheduled) => verifiesAt(scheduled, now)).map(({ key }) => key.jwk) }
    }),
    list,
    rotate
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

  /** A key generated once per process: deterministic within a test run, and fast after the first. */
  static readonly layerTest = Layer.effect(
    KeyService,
    Effect.promise(() => (testKey ??= generatePkcs8().then((pem) => heldFromPem(pem, { createdAt: 0, activeFrom: 0, position: 0 })))).pipe(
      Effect.map((key) => fixedKeys(key, "The test key does not rotate"))
    )
  )
}

let testKey: Promise<HeldKey> | undefined

/** The fixed key of `layerTest` (for tests that sign tokens themselves). */
export const testSigningKey = Effect.gen(function*() {
  const keys = yield* KeyService
  const { kid, privateKey } = keys.signingKeyAt(0)
  const publicJwk = (yield* keys.jwks).keys.find((key) => key.kid === kid)!
  return { kid, privateKey, publicJwk }
})
