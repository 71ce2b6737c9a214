/**
 * Named secrets every instance must agree on (the credential digest key, a generated signing key).
 * The first instance to start creates each one; the others read it back. Kept in the database, so
 * instances sharing one PostgreSQL sign and hash alike, and the embedded database keeps them across
 * restarts.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import { decodeRows } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

const ValueRow = Schema.Struct({ value: Schema.String })
const NamedValueRow = Schema.Struct({ name: Schema.String, value: Schema.String })

export interface ServerKeyStoreShape {
  /** The stored value of `name`, or `create()` stored atomically when none exists yet. */
  readonly getOrCreate: (
    name: string,
    create: () => Promise<string>
  ) => Effect.Effect<Redacted.Redacted<string>, StorageUnavailable>
  /** The stored value of `name`, if any. */
  readonly get: (name: string) => Effect.Effect<Option.Option<Redacted.Redacted<string>>, StorageUnavailable>
  readonly remove: (name: string) => Effect.Effect<void, StorageUnavailable>
  /** Replaces each value for which `transform` answers a new stored form (all under lock); answers how many. */
  readonly reseal: <E>(
    transform: (name: string, stored: string) => Effect.Effect<Option.Option<string>, E>
  ) => Effect.Effect<number, E | StorageUnavailable>
}

export class ServerKeyStore extends Context.Tag("service-auth/ServerKeyStore")<ServerKeyStore, ServerKeyStoreShape>() {
  static readonly layerSql = Layer.effect(
    ServerKeyStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ServerKeyStore.of({
        getOrCreate: (name, create) =>
          Effect.gen(function*() {
            const read = sql`SELECT value FROM server_keys WHERE name = ${name}`.pipe(decodeRows(ValueRow), storageOperation)
            const [existing] = yield* read
            if (existing !== undefined) return Redacted.make(existing.value)
            // Only the statements are timed: generating an RSA key takes seconds on a loaded machine.
            const value = yield* Effect.promise(create)
            yield* storageOperation(
              sql`INSERT INTO server_keys (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING`
            )
            const [stored] = yield* read
            return Redacted.make(stored!.value)
          }),
        get: (name) =>
          sql`SELECT value FROM server_keys WHERE name = ${name}`.pipe(
            decodeRows(ValueRow),
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => Redacted.make(row.value))),
            storageOperation
          ),
        remove: (name) => sql`DELETE FROM server_keys WHERE name = ${name}`.pipe(Effect.asVoid, storageOperation),
        reseal: (transform) =>
          Effect.gen(function*() {
            let changed = 0
            const rows = yield* sql`SELECT name, value FROM server_keys ORDER BY name FOR UPDATE`.pipe(decodeRows(NamedValueRow))
            for (const row of rows) {
              const replacement = yield* transform(row.name, row.value)
              if (Option.isNone(replacement)) continue
              yield* sql`UPDATE server_keys SET value = ${replacement.value} WHERE name = ${row.name}`
              changed++
            }
            return changed
          }).pipe(sql.withTransaction, storageOperation)
      })
    })
  )

  static readonly layerMemory = Layer.sync(ServerKeyStore, () => {
    const values = new Map<string, Promise<string>>()
    return ServerKeyStore.of({
      getOrCreate: (name, create) =>
        Effect.promise(() => {
          if (!values.has(name)) values.set(name, create())
          return values.get(name)!
        }).pipe(Effect.map(Redacted.make)),
      get: (name) =>
        Effect.promise(async () => {
          const value = values.get(name)
          return value === undefined ? Option.none() : Option.some(Redacted.make(await value))
        }),
      remove: (name) => Effect.sync(() => void values.delete(name)),
      reseal: (transform) =>
        Effect.gen(function*() {
          let changed = 0
          for (const [name, value] of values) {
            const replacement = yield* transform(name, yield* Effect.promise(() => value))
            if (Option.isNone(replacement)) continue
            values.set(name, Promise.resolve(replacement.value))
            changed++
          }
          return changed
        })
    })
  })
}
