/**
 * What a statement answers, read through a schema: decoded, never cast. Both drivers (node-postgres
 * and PGlite) return `timestamptz` as a `Date` and `jsonb` parsed, so the schemas say exactly that.
 * A row that does not match is a bug in a statement or a schema: a defect (logged, 500), never a
 * client's error.
 */
import { Effect, Schema } from "effect"

export const decodeRows = <A, I>(row: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(row))
  return <E, R>(statement: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
    Effect.flatMap(statement, (rows) => Effect.orDie(decode(rows)))
}
