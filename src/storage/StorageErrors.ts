/**
 * Where SQL failures stop. A database that cannot be reached (refused or lost connection,
 * connection timeout, server shutting down or out of resources) is `StorageUnavailable`, which
 * callers answer with 503. Any other SQL error is a bug in our statements and becomes a defect:
 * logged, answered 500 without detail, never leaked into a response body.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Option, ParseResult } from "effect"
import { StorageUnavailable } from "../domain/Errors.js"

/** SQLSTATE classes that mean "the database is not there right now". */
const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-3])/

const isUnavailable = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined
  const code = typeof cause?.code === "string" ? cause.code : undefined
  if (code === undefined) return true // socket closed, timeout: no SQLSTATE was ever received
  if (/^[0-9A-Z]{5}$/.test(code)) return UNAVAILABLE_SQLSTATE.test(code)
  return true // node errors: ECONNREFUSED, ECONNRESET, ETIMEDOUT, ...
}

const isSqlError = (error: unknown): error is SqlError =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError"

export const storageUnavailable = new StorageUnavailable({ description: "The database is unavailable; retry later" })

/**
 * The longest a storage operation may take before the request is answered 503: a database that
 * stopped answering (rather than refusing) must not hang clients. Statements take milliseconds.
 */
export const STORAGE_TIMEOUT = Duration.millis(1500)

/**
 * SQL failures as callers see them: an unreachable database is `StorageUnavailable` (503), whether
 * a statement failed or, inside a transaction, its COMMIT or ROLLBACK did (which @effect/sql turns
 * into a defect); any other SQL error is a defect.
 */
export const refineSqlError = <A, E, R>(
  effect: Effect.Effect<A, E | SqlError, R>
): Effect.Effect<A, Exclude<E, SqlError> | StorageUnavailable, R> =>
  Effect.catchIf(
    effect,
    isSqlError,
    (error) => (isUnavailable(error) ? Effect.fail(storageUnavailable) : Effect.die(error))
  ).pipe(
    Effect.catchSomeDefect((defect) =>
      isSqlError(defect) && isUnavailable(defect) ? Option.some(Effect.fail(storageUnavailable)) : Option.none()
    )
  ) as Effect.Effect<A, Exclude<E, SqlError> | StorageUnavailable, R>

/**
 * At most `STORAGE_TIMEOUT`, then 503. Disconnected: the 503 goes out at once while the interrupted
 * statement (its cancel request, a transaction's ROLLBACK) winds down in the background. A database
 * that accepts connections but never answers would otherwise hold the request for many seconds.
 */
export const withStorageTimeout = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StorageUnavailable, R> =>
  effect.pipe(
    Effect.disconnect,
    Effect.timeoutFail({ duration: STORAGE_TIMEOUT, onTimeout: () => storageUnavailable })
  )

/** A repository operation: its SQL errors refined, its time bounded. */
export const storageOperation = <A, E, R>(
  effect: Effect.Effect<A, E | SqlError, R>
): Effect.Effect<A, Exclude<E, SqlError> | StorageUnavailable, R> => withStorageTimeout(refineSqlError(effect))

/**
 * What a statement answers, read through a schema: decoded, never cast. Repositories read rows with
 * `SqlSchema` (`findAll`, `findOne`, `single`, `void`) and the row's schema. Both drivers
 * (node-postgres and PGlite) return `timestamptz` as a `Date` and `jsonb` parsed, so the schemas say
 * exactly that. A row that does not match is a bug in a statement or a schema: `parseFailureIsDefect`
 * makes it a defect at the repository's edge (logged, 500), never a client's error.
 */
export const parseFailureIsDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, ParseResult.ParseError> => error instanceof ParseResult.ParseError,
    Effect.die
  )
