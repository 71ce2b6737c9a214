/**
 * The stored signing keys (migration 0004): what every instance builds its key set from. Keys are
 * only ever added, one at a time, under a lock that every insertion takes (a rotation, the first
 * key, the automatic rotation), so concurrent rotations on several instances see each other and
 * cannot schedule two keys where one was meant. Private keys are stored as given (sealed or not:
 * `KeyEncryption` decides); this module never reads them.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Either, Layer, Option, Schema } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

export const PublicRsaJwk = Schema.Struct({ kty: Schema.Literal("RSA"), n: Schema.String, e: Schema.String })
export type PublicRsaJwk = typeof PublicRsaJwk.Type

export interface StoredSigningKey {
  readonly kid: string
  readonly publicJwk: PublicRsaJwk
  /** PKCS#8 PEM, or sealed (`enc:v1:...`). */
  readonly privateKey: string
  readonly createdAt: Date
  readonly activeFrom: Date
  /** The order keys were added in (assigned by the store). */
  readonly position: number
}

/** A key to add: the store assigns its position. */
export type NewSigningKey = Omit<StoredSigningKey, "position">
/** A key ready to store but for its times, which are decided when it is inserted. */
export type SealedKey = Omit<NewSigningKey, "createdAt" | "activeFrom">

const KeyRow = Schema.Struct({
  kid: Schema.String,
  public_jwk: PublicRsaJwk,
  private_key: Schema.String,
  created_at: Schema.DateFromSelf,
  active_from: Schema.DateFromSelf,
  position: Schema.Int
})

/** A row as the key it stores. */
const StoredKey = Schema.transform(
  KeyRow,
  Schema.typeSchema(
    Schema.Struct({
      kid: Schema.String,
      publicJwk: PublicRsaJwk,
      privateKey: Schema.String,
      createdAt: Schema.DateFromSelf,
      activeFrom: Schema.DateFromSelf,
      position: Schema.Int
    })
  ),
  {
    strict: true,
    decode: (row) => ({
      kid: row.kid,
      publicJwk: row.public_jwk,
      privateKey: row.private_key,
      createdAt: row.created_at,
      activeFrom: row.active_from,
      position: row.position
    }),
    encode: (key) => ({
      kid: key.kid,
      public_jwk: key.publicJwk,
      private_key: key.privateKey,
      created_at: key.createdAt,
      active_from: key.activeFrom,
      position: key.position
    })
  }
)

const NewKey = Schema.Struct({
  kid: Schema.String,
  publicJwk: PublicRsaJwk,
  privateKey: Schema.String,
  createdAt: Schema.DateFromSelf,
  activeFrom: Schema.DateFromSelf
})
const Resealed = Schema.Struct({ kid: Schema.String, privateKey: Schema.String })

export interface SigningKeyStoreShape {
  readonly list: Effect.Effect<ReadonlyArray<StoredSigningKey>, StorageUnavailable>
  /**
   * Under the store's lock, `decide` sees every stored key and answers the key to insert (or none,
   * or why not); the insertion commits with the lock held, so no other insertion decided in between.
   */
  readonly insertIf: <E>(
    decide: (keys: ReadonlyArray<StoredSigningKey>) => Either.Either<Option.Option<NewSigningKey>, E>,
    /** Written with the insertion, in its transaction (the audit trail's `key.rotated`). */
    alongside?: (key: NewSigningKey) => Effect.Effect<void, StorageUnavailable>
  ) => Effect.Effect<Option.Option<NewSigningKey>, E | StorageUnavailable>
  /** Replaces each private key for which `transform` answers a new stored form; answers how many. */
  readonly reseal: <E>(
    transform: (kid: string, stored: string) => Effect.Effect<Option.Option<string>, E>
  ) => Effect.Effect<number, E | StorageUnavailable>
}

export class SigningKeyStore extends Context.Tag("service-auth/SigningKeyStore")<SigningKeyStore, SigningKeyStoreShape>() {
  static readonly layerSql = Layer.effect(
    SigningKeyStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const findKeys = SqlSchema.findAll({
        Request: Schema.Void,
        Result: StoredKey,
        execute: () => sql`SELECT kid, public_jwk, private_key, created_at, active_from, position FROM signing_keys`
      })
      const insertKey = SqlSchema.void({
        Request: NewKey,
        execute: (key) =>
          sql`INSERT INTO signing_keys (kid, public_jwk, private_key, created_at, active_from)
            VALUES (${key.kid}, ${JSON.stringify(key.publicJwk)}::jsonb, ${key.privateKey}, ${key.createdAt},
                    ${key.activeFrom})`
      })
      const updatePrivateKey = SqlSchema.void({
        Request: Resealed,
        execute: ({ kid, privateKey }) => sql`UPDATE signing_keys SET private_key = ${privateKey} WHERE kid = ${kid}`
      })
      const select = parseFailureIsDefect(findKeys())
      const lock = sql`LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE`
      return SigningKeyStore.of({
        list: storageOperation(select),
        insertIf: (decide, alongside) =>
          Effect.gen(function*() {
            yield* lock
            const decision = decide(yield* select)
            if (Either.isLeft(decision)) return yield* Effect.fail(decision.left)
            if (Option.isSome(decision.right)) {
              const key = decision.right.value
              yield* parseFailureIsDefect(insertKey(key))
              if (alongside !== undefined) yield* alongside(key)
            }
            return decision.right
          }).pipe(sql.withTransaction, storageOperation),
        reseal: (transform) =>
          Effect.gen(function*() {
            yield* lock
            let changed = 0
            for (const key of yield* select) {
              const replacement = yield* transform(key.kid, key.privateKey)
              if (Option.isNone(replacement)) continue
              yield* parseFailureIsDefect(updatePrivateKey({ kid: key.kid, privateKey: replacement.value }))
              changed++
            }
            return changed
          }).pipe(sql.withTransaction, storageOperation)
      })
    })
  )

  static readonly layerMemory = Layer.sync(SigningKeyStore, () => {
    let keys: ReadonlyArray<StoredSigningKey> = []
    return SigningKeyStore.of({
      list: Effect.sync(() => keys),
      // Synchronous from the decision to the insertion: nothing else runs in between.
      insertIf: <E>(
        decide: (keys: ReadonlyArray<StoredSigningKey>) => Either.Either<Option.Option<NewSigningKey>, E>,
        alongside?: (key: NewSigningKey) => Effect.Effect<void, StorageUnavailable>
      ): Effect.Effect<Option.Option<NewSigningKey>, E | StorageUnavailable> =>
        Effect.suspend((): Effect.Effect<Option.Option<NewSigningKey>, E | StorageUnavailable> => {
          const decision = decide(keys)
          if (Either.isLeft(decision)) return Effect.fail(decision.left)
          if (Option.isNone(decision.right)) return Effect.succeed(decision.right)
          const key = decision.right.value
          keys = [...keys, { ...key, position: keys.length + 1 }]
          return Effect.as(alongside === undefined ? Effect.void : alongside(key), decision.right)
        }),
      reseal: (transform) =>
        Effect.gen(function*() {
          let changed = 0
          const next: Array<StoredSigningKey> = []
          for (const key of keys) {
            const replacement = yield* transform(key.kid, key.privateKey)
            if (Option.isSome(replacement)) changed++
            next.push(Option.isSome(replacement) ? { ...key, privateKey: replacement.value } : key)
          }
          keys = next
          return changed
        })
    })
  })
}
