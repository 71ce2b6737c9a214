/**
 * Named secrets every instance must agree on (the credential digest key, a generated signing key).
 * The first instance to start creates each one; the others read it back. Kept in the database, so
 * instances sharing one PostgreSQL sign and hash alike, and the embedded database keeps them across
 * restarts.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import { parseFailureIsDefect, storageOperation } from "../storage/StorageErrors.js"

const KeyName = Schema.String
const ValueRow = Schema.Struct({ value: Schema.String })
const NamedValueRow = Schema.Struct({ name: Schema.String, value: Schema.String })
const NewKey = Schema.Struct({ name: Schema.String, value: Schema.String })

/** The stored value of a key by its name, if any (also read by an import, inside its transaction). */
export const serverKeyValue = (sql: SqlClient.SqlClient) =>
  SqlSchema.findOne({
    Request: KeyName,
    Result: ValueRow,
    execute: (name) => sql`SELECT value FROM server_keys WHERE name = ${name}`
  })

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
      const findValue = serverKeyValue(sql)
      const insertIfAbsent = SqlSchema.void({
        Request: NewKey,
        execute: ({ name, value }) => sql`INSERT INTO server_keys (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING`
      })
      const deleteKey = SqlSchema.void({ Request: KeyName, execute: (name) => sql`DELETE FROM server_keys WHERE name = ${name}` })
      const lockAll = SqlSchema.findAll({
        Request: Schema.Void,
        Result: NamedValueRow,
        execute: () => sql`SELECT name, value FROM server_keys ORDER BY name FOR UPDATE`
      })
      const updateValue = SqlSchema.void({
        Request: NewKey,
        execute: ({ name, value }) => sql`UPDATE server_keys SET value = ${value} WHERE name = ${name}`
      })
      const read = (name: string) => findValue(name).pipe(parseFailureIsDefect, storageOperation)

      return ServerKeyStore.of({
        getOrCreate: (name, create) =>
          Effect.gen(function*() {
            const existing = yield* read(name)
            if (Option.isSome(existing)) return Redacted.make(existing.value.value)
            // Only the statements are timed: generating an RSA key takes seconds on a loaded machine.
            const value = yield* Effect.promise(create)
            yield* storageOperation(parseFailureIsDefect(insertIfAbsent({ name, value })))
            const stored = yield* read(name)
            return Redacted.make(Option.getOrThrow(stored).value)
          }),
        get: (name) => Effect.map(read(name), Option.map((row) => Redacted.make(row.value))),
        remove: (name) => deleteKey(name).pipe(parseFailureIsDefect, storageOperation),
        reseal: (transform) =>
          Effect.gen(function*() {
            let changed = 0
            for (const row of yield* lockAll()) {
              const replacement = yield* transform(row.name, row.value)
              if (Option.isNone(replacement)) continue
              yield* updateValue({ name: row.name, value: replacement.value })
              changed++
            }
            return changed
          }).pipe(parseFailureIsDefect, sql.withTransaction, storageOperation)
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
