/**
 * The admin CLI's `rotate` wait for the old credential to go idle (`waitUntilIdle`), on a scripted
 * admin client and the TestClock, and the command it prints to finish later.
 */
import { it as effect } from "@effect/vitest"
import { Chunk, Duration, Effect, Either, Fiber, Option, TestClock } from "effect"
import { describe, expect, it } from "vitest"
import type { AdminClientShape } from "../src/cli/AdminClientShape.js"
import { ServerUnreachable } from "../src/cli/AdminClientErrors.js"
import { commandPrefix } from "../src/cli/Output.js"
import { waitUntilIdle } from "../src/cli/Rotation.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"

/**
 * rotate's wait, on Effect's TestClock against a scripted admin API: the old credential is removed
 * only once its last_used_at has been still for the whole --idle, however often it moved before.
 */
describe("rotate's wait", () => {
  const oldId = `svc_${"a".repeat(32)}` as ClientId
  const newId = `svc_${"b".repeat(32)}` as ClientId
  const created_at = new Date(0)

  /** An admin API whose credential list is whatever `state` says when asked. */
  const scripted = (state: { oldLastUsed: Date | null; old: boolean; fresh: boolean; down: boolean }) =>
    ({
      listCredentials: () =>
        state.down
          ? Effect.fail(new ServerUnreachable({ message: "connection refused" }))
          : Effect.succeed({
            credentials: [
              ...(state.old ? [{ client_id: oldId, created_at, last_used_at: state.oldLastUsed }] : []),
              ...(state.fresh ? [{ client_id: newId, created_at, last_used_at: null }] : [])
            ]
          })
    }) as unknown as AdminClientShape

  /** The wait, for an old credential last used at `lastUsed` (by default at the start: it was in use). */
  const wait = (client: AdminClientShape, lastUsed: Date | null = new Date(0)) =>
    waitUntilIdle({
      client,
      address: {
        profile: "acme" as ProfileId,
        environment: "production" as EnvironmentName,
        uuid: "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10" as ServiceUuid
      },
      oldId,
      newId,
      lastUsed,
      observedAt: 0,
      idle: Duration.minutes(10),
      poll: Duration.seconds(5),
      keepBoth: (why) => `${why}; both credentials remain`
    })

  /**
   * Moves the TestClock by `total`, one poll at a time and each step only once the wait sleeps
   * again or has ended. The wait's notes are real writes to stderr, which TestClock.adjust does not
   * wait for: on a busy machine a single large adjust can end before the wait sleeps again, leaving
   * it asleep past a time the test never reaches.
   */
  const advance = (fiber: Fiber.Fiber<unknown, unknown>, total: Duration.DurationInput) =>
    Effect.gen(function*() {
      let left = Duration.toMillis(total)
      while (left > 0) {
        for (let tries = 0; Chunk.isEmpty(yield* TestClock.sleeps()) && Option.isNone(yield* Fiber.poll(fiber)); tries++) {
          if (tries > 30_000) return yield* Effect.dieMessage("the wait neither slept nor ended within 30 s")
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1)))
        }
        const step = Math.min(left, 5_000)
        yield* TestClock.adjust(step)
        left -= step
      }
    })

  effect.effect("waits for --idle from the last move of last_used_at", () =>
    Effect.gen(function*() {
      const state = { oldLastUsed: null as Date | null, old: true, fresh: true, down: false }
      const fiber = yield* Effect.fork(wait(scripted(state)))
      yield* advance(fiber, "9 minutes")
      state.oldLastUsed = new Date(9 * 60_000) // an application still uses the old secret
      yield* advance(fiber, "9 minutes")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true) // 18 min in, but only 9 still
      yield* advance(fiber, "2 minutes")
      expect(yield* Fiber.join(fiber)).toBe("idle")
    }))

  effect.effect("a credential never used is removed once still for 2 minutes, not the whole idle", () =>
    Effect.gen(function*() {
      const state = { oldLastUsed: null as Date | null, old: true, fresh: true, down: false }
      const fiber = yield* Effect.fork(wait(scripted(state), null))
      yield* advance(fiber, "1 minute")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* advance(fiber, "1 minute")
      expect(yield* Fiber.join(fiber)).toBe("idle")
    }))

  effect.effect("a credential never used that is used meanwhile waits the whole idle", () =>
    Effect.gen(function*() {
      const used = { oldLastUsed: null as Date | null, old: true, fresh: true, down: false }
      const watched = yield* Effect.fork(wait(scripted(used), null))
      yield* advance(watched, "1 minute")
      used.oldLastUsed = new Date(30_000) // a token request just before rotate looked, recorded late
      yield* advance(watched, "5 minutes")
      expect(Option.isNone(yield* Fiber.poll(watched))).toBe(true)
      yield* advance(watched, "6 minutes")
      expect(yield* Fiber.join(watched)).toBe("idle")
    }))

  it("the command to finish later is the one that runs here: npm run cli -- in a checkout", () => {
    const before = process.env.npm_lifecycle_event
    try {
      process.env.npm_lifecycle_event = "cli"
      expect(commandPrefix()).toBe("npm run cli --")
      delete process.env.npm_lifecycle_event
      expect(commandPrefix()).toBe("service-auth")
    } finally {
      if (before === undefined) delete process.env.npm_lifecycle_event
      else process.env.npm_lifecycle_event = before
    }
  })

  effect.effect("keeps counting through a few failed polls, and gives up after five in a row", () =>
    Effect.gen(function*() {
      const state = { oldLastUsed: new Date(0) as Date | null, old: true, fresh: true, down: true }
      const fiber = yield* Effect.fork(Effect.either(wait(scripted(state))))
      yield* advance(fiber, "20 seconds") // four failures
      state.down = false
      yield* advance(fiber, "10 minutes")
      expect(yield* Fiber.join(fiber)).toEqual(Either.right("idle"))

      state.down = true
      const failing = yield* Effect.fork(Effect.either(wait(scripted(state))))
      yield* advance(failing, "25 seconds")
      const stopped = yield* Fiber.join(failing)
      expect(Either.isLeft(stopped) && stopped.left.message).toBe("connection refused; both credentials remain")
    }))

  effect.effect("ends when the old credential is removed elsewhere, stops when the new one is", () =>
    Effect.gen(function*() {
      const state = { oldLastUsed: null as Date | null, old: true, fresh: true, down: false }
      const fiber = yield* Effect.fork(wait(scripted(state)))
      yield* advance(fiber, "1 minute")
      state.old = false
      yield* advance(fiber, "5 seconds")
      expect(yield* Fiber.join(fiber)).toBe("removed elsewhere")

      const other = { oldLastUsed: null as Date | null, old: true, fresh: true, down: false }
      const stopping = yield* Effect.fork(Effect.either(wait(scripted(other))))
      yield* advance(stopping, "1 minute")
      other.fresh = false
      yield* advance(stopping, "5 seconds")
      const stopped = yield* Fiber.join(stopping)
      expect(Either.isLeft(stopped) && stopped.left.message).toContain(`the new credential ${newId} was removed meanwhile`)
    }))
})
