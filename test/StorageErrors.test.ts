/**
 * Where SQL failures stop (`refineSqlError`): an unreachable database is 503 `StorageUnavailable`,
 * whether the statement failed or, inside a transaction, its COMMIT or ROLLBACK did (which
 * @effect/sql turns into a defect); any other SQL error stays a defect (a bug: logged, 500).
 */
import { SqlError } from "@effect/sql/SqlError"
import { expect, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { StorageUnavailable } from "../src/domain/Errors.js"
import { refineSqlError } from "../src/storage/StorageErrors.js"

const lost = () => new SqlError({ cause: new Error("Connection terminated unexpectedly"), message: "Failed to execute statement" })
const bug = () =>
  new SqlError({ cause: Object.assign(new Error("relation does not exist"), { code: "42P01" }), message: "Failed to execute statement" })
const restarting = () =>
  new SqlError({ cause: Object.assign(new Error("terminating connection"), { code: "57P01" }), message: "Failed to execute statement" })

const outcome = (effect: Effect.Effect<never, SqlError>) =>
  Effect.map(Effect.exit(refineSqlError(effect)), (exit) =>
    Exit.isSuccess(exit)
      ? "success"
      : Cause.isFailType(exit.cause) && exit.cause.error instanceof StorageUnavailable
      ? "503"
      : Cause.isDie(exit.cause)
      ? "defect"
      : Cause.pretty(exit.cause))

it.effect("a lost connection is 503, failed statement or failed COMMIT/ROLLBACK alike", () =>
  Effect.gen(function*() {
    expect(yield* outcome(Effect.fail(lost()))).toBe("503")
    expect(yield* outcome(Effect.die(lost()))).toBe("503")
    expect(yield* outcome(Effect.fail(restarting()))).toBe("503")
    expect(yield* outcome(Effect.die(restarting()))).toBe("503")
  }))

it.effect("any other SQL error is a defect, failed or died", () =>
  Effect.gen(function*() {
    expect(yield* outcome(Effect.fail(bug()))).toBe("defect")
    expect(yield* outcome(Effect.die(bug()))).toBe("defect")
    expect(yield* outcome(Effect.die(new Error("not SQL")))).toBe("defect")
  }))
