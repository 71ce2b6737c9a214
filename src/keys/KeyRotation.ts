/**
 * Rotation: a new key is stored, published at once and signing KEY_PUBLISH_DELAY_S later, by
 * `POST /admin/keys/rotate` or, with KEY_ROTATION_DAYS, automatically once the active key is that
 * old. The store's lock decides between instances; the audit trail records `key.rotated`.
 */
import { Clock, Duration, Effect, Either, Option, Schedule } from "effect"
import type { AdminActorShape } from "../domain/AdminActor.js"
import { KEY_ROTATION_SCHEDULE_ACTOR_NAME } from "../domain/AdminRoles.js"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, type StorageUnavailable } from "../domain/Errors.js"
import type { AuditTrailShape } from "../storage/AuditTrail.js"
import type { SealedKey, SigningKeyStoreShape } from "./SigningKeyStore.js"
import { type KeyInfo, type KeyRing, type StoredTimes, timesOf } from "./KeyRing.js"
import { schedule, type Scheduled, statusAt } from "./KeySchedule.js"
import { generatePkcs8 } from "./SigningKeyMaterial.js"

/** The actor of an automatic rotation (KEY_ROTATION_DAYS) in the audit trail: no admin token made it. */
const SCHEDULE_ACTOR: AdminActorShape = { name: KEY_ROTATION_SCHEDULE_ACTOR_NAME, source: "server" }

/** How often KEY_ROTATION_DAYS is checked. */
const AUTOMATIC_ROTATION_CHECK = Duration.minutes(1)

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

export const makeKeyRotation = (options: {
  readonly store: SigningKeyStoreShape
  readonly audit: AuditTrailShape
  readonly publishDelayMillis: number
  /** A new key sealed for storage. */
  readonly sealedKey: (pem: string) => Effect.Effect<SealedKey>
  readonly ring: () => KeyRing
  readonly reload: Effect.Effect<void, StorageUnavailable>
  readonly list: Effect.Effect<ReadonlyArray<KeyInfo>, StorageUnavailable>
}) => {
  const { audit, list, publishDelayMillis, reload, ring, sealedKey, store } = options

  /** Inserts a new key when `decide` (under the store's lock, at `now`) says so, then reloads. */
  const rotateWhen = <E>(
    actor: AdminActorShape,
    decide: (scheduled: ReadonlyArray<Scheduled<StoredTimes>>, now: number) => Either.Either<boolean, E>
  ) =>
    Effect.gen(function*() {
      const pem = yield* Effect.promise(generatePkcs8)
      const clock = yield* Effect.clock
      const sealed = yield* sealedKey(pem)
      const inserted = yield* store.insertIf((keys) => {
        // The time is read under the lock: read before it, a concurrent rotation that committed
        // meanwhile could look scheduled for later than "now" and refuse this one for no reason.
        const now = clock.unsafeCurrentTimeMillis()
        const candidate = { ...sealed, createdAt: new Date(now), activeFrom: new Date(now + publishDelayMillis) }
        return Either.map(decide(schedule(keys.map(timesOf)), now), (insert) => (insert ? Option.some(candidate) : Option.none()))
      }, (key) =>
        audit.record([auditEvent(actor, key.createdAt, {
          action: "key.rotated",
          details: { kid: key.kid, active_from: key.activeFrom.toISOString() }
        })]))
      yield* reload
      return inserted
    })

  const rotate = (actor: AdminActorShape) =>
    Effect.gen(function*() {
      // What memory already shows costs no key generation; the store's lock decides the rest.
      const known = pendingConflict(ring().ordered, yield* Clock.currentTimeMillis)
      if (Option.isSome(known)) return yield* known.value
      const rotated = yield* rotateWhen(actor, (scheduled, now) =>
        Option.match(pendingConflict(scheduled, now), { onNone: () => Either.right(true), onSome: Either.left }))
      const key = Option.getOrThrow(rotated)
      const info = (yield* list).find((candidate) =>
        candidate.kid === key.kid
      )
      return info ?? (yield* Effect.dieMessage(`the key ${key.kid} just stored is not listed`))
    })

  /** KEY_ROTATION_DAYS: the loop to fork. Every instance checks; the store's lock makes the first one rotate. */
  const rotateAutomatically = (rotationDays: number) => {
    const maxAgeMillis = rotationDays * 24 * 3600 * 1000
    const due = (scheduled: ReadonlyArray<Scheduled<StoredTimes>>, now: number) =>
      !scheduled.some((s) => statusAt(s, now) === "next") &&
      scheduled.some((s) => statusAt(s, now) === "active" && now - s.key.activeFrom >= maxAgeMillis)
    return Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (!due(ring().ordered, now)) return
      const rotated = yield* rotateWhen(SCHEDULE_ACTOR, (scheduled, at) => Either.right(due(scheduled, at)))
      if (Option.isSome(rotated)) {
        yield* Effect.logInfo(`signing key rotated automatically (KEY_ROTATION_DAYS): new key ${rotated.value.kid}`)
      }
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning(`automatic key rotation failed: ${error.description}`)),
      Effect.repeat(Schedule.spaced(AUTOMATIC_ROTATION_CHECK))
    )
  }

  return { rotate, rotateAutomatically }
}
