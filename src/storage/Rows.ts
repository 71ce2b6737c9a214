/**
 * What a statement answers, read through a schema: decoded, never cast. Repositories read rows with
 * `SqlSchema` (`findAll`, `findOne`, `single`, `void`) and the row's schema. Both drivers
 * (node-postgres and PGlite) return `timestamptz` as a `Date` and `jsonb` parsed, so the schemas say
 * exactly that. A row that does not match is a bug in a statement or a schema: `parseFailureIsDefect`
 * makes it a defect at the repository's edge (logged, 500), never a client's error.
 */
import { Effect, ParseResult, Schema } from "effect"

export const parseFailureIsDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, ParseResult.ParseError> => error instanceof ParseResult.ParseError,
    Effect.die
  )

/** The rows of a statement decoded with `row`: for the statements not yet declared with `SqlSchema` (CacheCoherence). */
export const decodeRows = <A, I>(row: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(row))
  return <E, R>(statement: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
    Effect.flatMap(statement, (rows) => Effect.orDie(decode(rows)))
}
