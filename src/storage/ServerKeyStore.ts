/**
 * Named secrets every instance must agree on (the credential digest key, a generated signing key).
 * The first instance to start creates each one; the others read it back. Kept in the database, so
 * instances sharing one PostgreSQL sign and hash alike, and the embedded database keeps them across
 * restarts.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import type { StorageUnavailable } from "../domain/Errors.js"
import { decodeRows } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

const ValueRow = Schema.Struct({ value: Schema.String })

export interface ServerKeyStoreShape {
  /** The stored value of `name`, or `create()` stored atomically when none exists yet. */
  readonly getOrCreate: (
    name: string,
    create: () => Promise<string>
  ) => Effect.Effect<Redacted.Redacted<string>, StorageUnavailable>
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
          })
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
        }).pipe(Effect.map(Redacted.make))
    })
  })
}
