/**
 * What a statement answers, read through a schema: decoded, never cast. Repositories read rows with
 * `SqlSchema` (`findAll`, `findOne`, `single`, `void`) and the row's schema. Both drivers
 * (node-postgres and PGlite) return `timestamptz` as a `Date` and `jsonb` parsed, so the schemas say
 * exactly that. A row that does not match is a bug in a statement or a schema: `parseFailureIsDefect`
 * makes it a defect at the repository's edge (logged, 500), never a client's error.
 */
import { Effect, ParseResult } from "effect"

export const parseFailureIsDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, ParseResult.ParseError> => error instanceof ParseResult.ParseError,
    Effect.die
  )

