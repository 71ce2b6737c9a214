/**
 * The key ring: the keys an instance holds in memory, in schedule order, so that signing and the
 * fast lane's synchronous verification never wait for the database. `makeKeyHolder` turns stored
 * rows into held keys (opening the private halves with KEY_ENCRYPTION_KEY) and swaps the ring.
 */
import { Clock, Effect, Either, Redacted } from "effect"
import * as Jose from "jose"
import type { KeyObject } from "node:crypto"
import type { StoredSigningKey } from "./SigningKeyStore.js"
import { type KeyEncryptionShape, signingKeyName } from "./KeyEncryption.js"
import { type KeyStatus, schedule, type Scheduled, statusAt, verifiesAt } from "./KeySchedule.js"
import {
  encodedHeaderOf,
  type HeldKey,
  type PublicJwk,
  publicJwkOf,
  publicKeyOf,
  SIGNING_ALGORITHM,
  type SigningKey,
  toPkcs8
} from "./SigningKeyMaterial.js"

/** A key as `GET /admin/keys` shows it: times and status, never private material. */
export interface KeyInfo {
  readonly kid: string
  readonly status: KeyStatus
  readonly createdAt: Date
  readonly activeFrom: Date
  readonly supersededAt: Date | null
  readonly retiresAt: Date | null
}

export interface KeyRing {
  readonly byKid: ReadonlyMap<string, Scheduled<HeldKey>>
  /** Schedule order, oldest first. */
  readonly ordered: ReadonlyArray<Scheduled<HeldKey>>
}

export const ringOf = (keys: ReadonlyArray<HeldKey>): KeyRing => {
  const ordered = schedule(keys)
  return { ordered, byKid: new Map(ordered.map((scheduled) => [scheduled.key.kid, scheduled])) }
}

export const signingKeyOf = (ring: KeyRing, nowMillis: number): SigningKey => {
  for (let index = ring.ordered.length - 1; index >= 0; index--) {
    const { key } = ring.ordered[index]!
    if (key.activeFrom <= nowMillis && key.signing !== undefined) return key.signing
  }
  // Only when this instance's clock is behind every key's start: the oldest key it can sign with.
  return ring.ordered.find(({ key }) => key.signing !== undefined)!.key.signing!
}

/** The public key `kid` names while it verifies; "retired" after; undefined when the ring does not hold it. */
export const verificationKeyOf = (ring: KeyRing, kid: string, nowMillis: number): KeyObject | "retired" | undefined => {
  const held = ring.byKid.get(kid)
  return held === undefined ? undefined : verifiesAt(held, nowMillis) ? held.key.publicKey : "retired"
}

/** The keys the JWKS publishes at `nowMillis`: next, active and retiring. */
export const publishedKeys = (ring: KeyRing, nowMillis: number): ReadonlyArray<PublicJwk> =>
  ring.ordered.filter((scheduled) => verifiesAt(scheduled, nowMillis)).map(({ key }) => key.jwk)

export interface StoredTimes {
  readonly kid: string
  readonly createdAt: number
  readonly activeFrom: number
  readonly position: number
}

export const timesOf = (key: StoredSigningKey): StoredTimes => ({
  kid: key.kid,
  createdAt: key.createdAt.getTime(),
  activeFrom: key.activeFrom.getTime(),
  position: key.position
})

export const infoOf = (scheduled: Scheduled<HeldKey | StoredTimes>, nowMillis: number): KeyInfo => ({
  kid: scheduled.key.kid,
  status: statusAt(scheduled, nowMillis),
  createdAt: new Date(scheduled.key.createdAt),
  activeFrom: new Date(scheduled.key.activeFrom),
  supersededAt: scheduled.supersededAt === undefined ? null : new Date(scheduled.supersededAt),
  retiresAt: scheduled.retiresAt === undefined ? null : new Date(scheduled.retiresAt)
})

/**
 * The ring an instance holds, and `adopt`, which rebuilds it from the stored keys (reusing the keys
 * already held: a kid never changes). The ring is swapped only when it holds a key that signs.
 */
export const makeKeyHolder = (encryption: KeyEncryptionShape) => {
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

  return { current: (): KeyRing => ring, adopt }
}
