/**
 * Failed client authentications counted in PostgreSQL, where every instance sees them
 * (`FailureCounts.layerSql`). Two limiters stand for two instances on one database; time is
 * `TestClock`'s. The process-level check is in MultiInstance.test.ts.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { FAILURE_WINDOW_MS, makeAuthFailureLimiter } from "../src/token/AuthFailureLimiter.js"
import { FailureCounts } from "../src/token/FailureCounts.js"
import { describeWithPostgres, postgresStorage } from "./support/Databases.js"

const clientId = () => `svc_${randomBytes(16).toString("hex")}`
const ADDRESS = "192.0.2.7"

describeWithPostgres("shared failure counts (PostgreSQL)", () => {
  layer(postgresStorage())((it) => {
    it.effect("two instances allow the limit for a pair between them, not the limit each", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const counts = yield* FailureCounts
        const [a, b] = [yield* makeAuthFailureLimiter(5, counts), yield* makeAuthFailureLimiter(5, counts)]
        const id = clientId()
        for (let i = 0; i < 3; i++) yield* a.recordFailure(id, ADDRESS)
        yield* b.recordFailure(id, ADDRESS)
        expect(Option.isNone(yield* b.blockedFor(id, ADDRESS))).toBe(true)
        yield* b.recordFailure(id, ADDRESS) // the fifth, shared
        expect(Option.isSome(yield* b.blockedFor(id, ADDRESS))).toBe(true)
        // A has seen three; its next failure brings back the shared count.
        expect(Option.isNone(yield* a.blockedFor(id, ADDRESS))).toBe(true)
        yield* a.recordFailure(id, ADDRESS)
        const blocked = yield* a.blockedFor(id, ADDRESS)
        expect(Option.getOrThrow(blocked)).toBeGreaterThan(0)
        expect(Option.getOrThrow(blocked)).toBeLessThanOrEqual(FAILURE_WINDOW_MS / 1000)
        // Another address, or another client id, is not affected.
        expect(Option.isNone(yield* a.blockedFor(id, "192.0.2.8"))).toBe(true)
        expect(Option.isNone(yield* b.blockedFor(clientId(), ADDRESS))).toBe(true)
      }))

    it.effect("the shared window closes after a minute: the next failure opens a new one", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const counts = yield* FailureCounts
        const id = clientId()
        const pair = `${ADDRESS}-${id}`
        expect(Option.getOrThrow(yield* counts.add(pair, Date.now(), FAILURE_WINDOW_MS)).count).toBe(1)
        const second = Option.getOrThrow(yield* counts.add(pair, Date.now() + 1_000, FAILURE_WINDOW_MS))
        expect(second.count).toBe(2)
        const reopened = Option.getOrThrow(yield* counts.add(pair, second.resetAt, FAILURE_WINDOW_MS))
        expect(reopened).toEqual({ count: 1, resetAt: second.resetAt + FAILURE_WINDOW_MS })
      }))

    it.effect("concurrent failures on two instances: exactly the limit between them take an attempt", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const counts = yield* FailureCounts
        const [a, b] = [yield* makeAuthFailureLimiter(5, counts), yield* makeAuthFailureLimiter(5, counts)]
        const id = clientId()
        const verdicts = yield* Effect.all(
          Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).recordFailure(id, ADDRESS)),
          { concurrency: "unbounded" }
        )
        expect(verdicts.filter(Option.isNone).length).toBe(5)
        // Both have learnt the window is full from their own refused failures.
        expect(Option.isSome(yield* a.blockedFor(id, ADDRESS))).toBe(true)
        expect(Option.isSome(yield* b.blockedFor(id, ADDRESS))).toBe(true)
      }))

    it.effect("a success on an instance whose failure of the pair is being counted waits for its rank", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const counts = yield* FailureCounts
        const [a, b] = [yield* makeAuthFailureLimiter(3, counts), yield* makeAuthFailureLimiter(3, counts)]
        const id = clientId()
        for (let i = 0; i < 3; i++) yield* a.recordFailure(id, ADDRESS)
        // B has seen nothing: a failure is sent to the database, and a success meanwhile awaits it.
        const failure = yield* Effect.fork(b.recordFailure(id, ADDRESS))
        yield* Effect.yieldNow()
        expect(b.counting(id, ADDRESS)).toBe(true)
        expect(Option.isSome(yield* b.admit(id, ADDRESS))).toBe(true)
        expect(Option.isSome(yield* Fiber.join(failure))).toBe(true)
      }))

    it.effect("a client id of any text is counted (stored as a digest of the pair)", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const counts = yield* FailureCounts
        const limiter = yield* makeAuthFailureLimiter(2, counts)
        const odd = `svc_\u0000${"x".repeat(10_000)}\ud800`
        yield* limiter.recordFailure(odd, ADDRESS)
        yield* limiter.recordFailure(odd, ADDRESS)
        expect(Option.isSome(yield* limiter.blockedFor(odd, ADDRESS))).toBe(true)
      }))
  })
})
