/** On an import, the target's signing keys against the file's: replaced as one set, or the same. */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { isSealed } from "../keys/KeyEncryption.js"
import { importSigningKey, SIGNING_KEY_NAME } from "../keys/SigningKeyMaterial.js"
import { parseFailureIsDefect } from "../storage/StorageErrors.js"
import { serverKeyValue } from "../keys/ServerKeyStore.js"
import type { ExportedTables } from "./ExportRows.js"

const SameRow = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Boolean) })
const KidRow = Schema.Struct({ kid: Schema.String })

/**
 * The target's signing keys against the file's: `difference` says how they differ (undefined when
 * they are the same, "none" when the target has none). Rows are the same when the same kids come in
 * the same order with the same public key and times; how the private half is stored may differ
 * (sealed with another KEY_ENCRYPTION_KEY, or not): the kid is the public key's thumbprint, and the
 * target's form is the one its servers open. A file with only a legacy key (`server_keys`
 * `signing_key`) is the same as a target with that value, or whose rows hold its kid (a server
 * there adopted it).
 */
export const compareSigningKeys = (tables: ExportedTables) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const kids = SqlSchema.findAll({
      Request: Schema.Void,
      Result: KidRow,
      execute: () => sql`SELECT kid FROM signing_keys ORDER BY position`
    })
    const legacyKey = serverKeyValue(sql)
    const sameKey = SqlSchema.findOne({
      Request: Schema.Struct({ kid: Schema.String, public_jwk: Schema.String, created_at: Schema.String, active_from: Schema.String }),
      Result: SameRow,
      execute: (key) =>
        sql`SELECT public_jwk = ${key.public_jwk}::jsonb AS public_jwk,
                   created_at = ${key.created_at}::timestamptz AS created_at,
                   active_from = ${key.active_from}::timestamptz AS active_from
            FROM signing_keys WHERE kid = ${key.kid}`
    })
    const target = (yield* kids(undefined).pipe(parseFailureIsDefect)).map((r) => r.kid)
    const targetLegacy = Option.getOrUndefined(yield* legacyKey(SIGNING_KEY_NAME).pipe(parseFailureIsDefect))
    const targetHasRows = target.length > 0
    const answer = (difference: string | undefined) => ({ targetHasRows, difference })
    if (!targetHasRows && targetLegacy === undefined) return answer("none")

    const file = tables.signing_keys
    const fileLegacy = tables.server_keys.find((k) => k.name === SIGNING_KEY_NAME)
    if (file.length === 0) {
      if (fileLegacy === undefined) return answer(undefined) // nothing to compare: the target keeps its keys
      if (!targetHasRows) return answer(targetLegacy!.value === fileLegacy.value ? undefined : "another signing key")
      const kid = isSealed(fileLegacy.value) ? "(sealed)" : (yield* Effect.promise(() => importSigningKey(fileLegacy.value))).kid
      return answer(target.includes(kid) ? undefined : `the file's key ${kid} is not among the target's ${target.join(", ")}`)
    }
    if (!targetHasRows) return answer("the target holds a signing key from before rotation, the file holds rotating keys")

    const onlyFile = file.filter((key) => !target.includes(key.kid)).map((key) => key.kid)
    const onlyTarget = target.filter((kid) => !file.some((key) => key.kid === kid))
    if (onlyFile.length > 0 || onlyTarget.length > 0) {
      return answer(
        [
          onlyFile.length > 0 ? `only in the file: ${onlyFile.join(", ")}` : undefined,
          onlyTarget.length > 0 ? `only in the target: ${onlyTarget.join(", ")}` : undefined
        ].filter((part) => part !== undefined).join("; ")
      )
    }
    for (const [index, key] of file.entries()) {
      const same = Option.getOrUndefined(
        yield* sameKey({
          kid: key.kid,
          public_jwk: JSON.stringify(key.public_jwk),
          created_at: key.created_at,
          active_from: key.active_from
        }).pipe(parseFailureIsDefect)
      )
      const different = Object.entries(same ?? {}).filter(([, equal]) => equal !== true).map(([column]) => column)
      if (different.length > 0) return answer(`key ${key.kid} has another ${different.join(", ")}`)
      if (target[index] !== key.kid) return answer("the keys were added in another order")
    }
    return answer(undefined)
  })
