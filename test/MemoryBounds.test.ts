/**
 * The in-memory tables that grow with tokens, clients, callers, addresses and services: each holds
 * at most its bound of entries, and an expired entry leaves by itself (the layer's periodic sweep,
 * driven here by TestClock), so a server under steady load levels off.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FiberRef, Layer, Metric, MetricLabel, TestClock } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { makeAuthFailureLimiter } from "../src/token/AuthFailureLimiter.js"
import { CallLastUse } from "../src/catalogue/CallLastUse.js"
import { ExpiringEntries, sweepPeriodically } from "../src/domain/ExpiringEntries.js"
import type { ClientId } from "../src/domain/Identifiers.js"
import { makeRateLimits, RateLimits } from "../src/service-call/RateLimits.js"
import { makeUpstreamAssertions, REUSE_SECONDS } from "../src/service-call/proxy/UpstreamAssertion.js"
import { FORGET_AFTER_MS, makeUpstreamGuard } from "../src/service-call/proxy/UpstreamGuard.js"
import {
  LABEL_SET_COUNTS,
  recordDuration,
  recordServiceCall,
  requestDuration,
  UNMATCHED_ROUTE
} from "../src/observability/ServiceMetrics.js"
import { LocalIds } from "../src/token/SeenJtis.js"
import { LastUse } from "../src/catalogue/LastUse.js"

const address = { profile: "p", environment: "e", uuid: "u" } as never

describe("ExpiringEntries", () => {
  it("holds at most its bound, evicting the entry set longest ago, and counts live evictions", () => {
    const table = new ExpiringEntries<string, number>(3)
    for (const [i, key] of ["a", "b", "c", "d"].entries()) table.set(key, i, 1_000, 0)
    expect(table.size).toBe(3)
    expect(table.get("a", 0)).toBeUndefined()
    expect(table.get("d", 0)).toBe(3)
    expect(table.evicted).toBe(1)
    // A set renews: "b" is now the newest, so "c" goes next.
    table.set("b", 10, 1_000, 0)
    table.set("e", 4, 1_000, 0)
    expect([table.get("b", 0), table.get("c", 0)]).toEqual([10, undefined])
  })

  it("never answers an expired entry, drops expired ones at the front on a set, and sweeps the rest", () => {
    const table = new ExpiringEntries<string, string>(100)
    table.set("short", "x", 100, 0)
    table.set("long", "y", 10_000, 0)
    table.set("short2", "z", 200, 0)
    expect(table.get("short", 100)).toBeUndefined()
    expect(table.size).toBe(2)
    // The front ("long") is live, so the set leaves the expired "short2" behind it; the sweep does not.
    table.set("new", "w", 10_000, 500)
    expect(table.size).toBe(3)
    expect(table.sweep(500)).toBe(1)
    expect(table.size).toBe(2)
    expect(table.evicted).toBe(0)
  })

  it("refuses a bound below one", () => {
    expect(() => new ExpiringEntries(0)).toThrow(/at least 1/)
  })

  it.scoped("is swept periodically, at the app's time, when nothing else touches it", () =>
    Effect.gen(function*() {
      const table = new ExpiringEntries<string, number>(10)
      for (let i = 0; i < 5; i++) table.set(`k${i}`, i, 30_000, 0)
      yield* sweepPeriodically([table], "20 millis")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      expect(table.size).toBe(5)
      // The app's clock (TestClock) passes the expiry; the next sweep, in real time, drops them all.
      yield* TestClock.adjust("31 seconds")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      expect(table.size).toBe(0)
    }))

  it.scoped("a sweeper does not run once per minute of a clock moved by years", () =>
    Effect.gen(function*() {
      let sweeps = 0
      yield* sweepPeriodically([{ sweep: () => sweeps++ }])
      yield* TestClock.adjust("3650 days")
      expect(sweeps).toBe(0)
    }))
})

describe("tables of the layers", () => {
  it.scoped("rate windows leave once ended, at the sweep or as new ones come", () =>
    Effect.gen(function*() {
      const limits = yield* Effect.provide(RateLimits, yield* Layer.build(RateLimits.layer))
      for (const client of ["a", "b", "c"]) limits.admit(address, { requests: 5, per_seconds: 10 }, client, 0)
      expect(limits.size()).toBe(3)
      // A new window drops up to two ended ones at the front; the sweep drops the rest.
      limits.admit(address, { requests: 5, per_seconds: 10 }, "d", 10_000)
      expect(limits.size()).toBe(2)
      expect(limits.sweep(10_000)).toBe(1)
      expect(limits.size()).toBe(1)
    }))

  it("rate windows past the bound evict the oldest, whoever chooses the clients", () => {
    const limits = makeRateLimits(1_000)
    for (let i = 0; i < 5_000; i++) limits.admit(address, { requests: 1, per_seconds: 60 }, `10.0.${i >> 8}.${i & 255}`, 0)
    expect(limits.size()).toBe(1_000)
  })

  it("a long key is held by its digest and still counts its own client only", () => {
    const limits = makeRateLimits(10)
    const long = { profile: "p".repeat(128), environment: "e".repeat(128), uuid: "u" } as never
    const limit = { requests: 1, per_seconds: 60 }
    expect(limits.admit(long, limit, "x".repeat(5_000), 0).allowed).toBe(true)
    expect(limits.admit(long, limit, "x".repeat(5_000), 1).allowed).toBe(false)
    expect(limits.admit(long, limit, `${"x".repeat(4_999)}y`, 1).allowed).toBe(true)
  })

  it.effect("a made-up client id of any length is counted, and held by its digest", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(2)
      const huge = "c".repeat(50_000)
      yield* limiter.recordFailure(huge, "127.0.0.1")
      yield* limiter.recordFailure(huge, "127.0.0.1")
      expect(limiter.blockedAt(huge, "127.0.0.1", 1_000)._tag).toBe("Some")
      expect(limiter.blockedAt(`${huge}d`, "127.0.0.1", 1_000)._tag).toBe("None")
      expect(limiter.tracked()).toBe(1)
    }))

  it.scoped("a credential's last call note leaves after a resolution, and a new call is noted again", () =>
    Effect.gen(function*() {
      const recorded: Array<string> = []
      const usage = Layer.succeed(LastUse, {
        recordUse: () => Effect.void,
        recordUseSync: (clientId, at) => void recorded.push(`${clientId}@${at.getTime()}`)
      })
      // As the server runs when it exports no traces: uses recorded synchronously.
      const callUse = yield* Effect.provide(
        CallLastUse,
        yield* Layer.build(Layer.provide(CallLastUse.layer, usage).pipe(Layer.locally(FiberRef.currentTracerEnabled, false)))
      )
      callUse.recordCallUse("svc_a" as ClientId, 0)
      callUse.recordCallUse("svc_a" as ClientId, 30_000)
      callUse.recordCallUse("svc_b" as ClientId, 0)
      expect(recorded).toEqual(["svc_a@0", "svc_b@0"])
      expect(callUse.tracked()).toBe(2)
      // A resolution later both notes have expired: a call is noted again, and the other note goes.
      callUse.recordCallUse("svc_a" as ClientId, 60_000)
      expect(recorded).toEqual(["svc_a@0", "svc_b@0", "svc_a@60000"])
      expect(callUse.tracked()).toBe(1)
    }))

  it.effect("failure pairs of made-up client ids and addresses leave once their window is over", () =>
    Effect.gen(function*() {
      const limiter = yield* makeAuthFailureLimiter(3)
      for (let i = 0; i < 50; i++) yield* limiter.recordFailure(`svc_${i}`, `127.0.0.${i}`)
      expect(limiter.tracked()).toBe(50)
      expect(limiter.sweep(59_999)).toBe(0)
      expect(limiter.sweep(60_000)).toBe(50)
      expect(limiter.tracked()).toBe(0)
    }))

  it("seen jti ids leave at the sweep once expired, the live ones stay", () => {
    const ids = new LocalIds(100, 0)
    ids.add("expires", 1_000, 0)
    ids.add("stays", 5_000, 0)
    expect(ids.sweep(1_000)).toBe(1)
    expect([ids.has("expires", 0), ids.has("stays", 1_000)]).toEqual([false, true])
    expect(ids.seen.size).toBe(1)
  })

  it("the circuit state of a service without calls is forgotten, and idle states are bounded", () => {
    let open = 0
    const guard = makeUpstreamGuard(10, (n) => (open = n), 3)
    // Five failures open the breaker of "failing".
    for (let i = 0; i < 5; i++) {
      const admission = guard.admit("failing", i)
      if (admission._tag === "Admitted") guard.settle("failing", admission, true, i)
    }
    expect([guard.size(), open]).toEqual([1, 1])
    expect(guard.sweep(FORGET_AFTER_MS - 1)).toBe(0)
    expect(guard.sweep(FORGET_AFTER_MS + 10)).toBe(1)
    expect([guard.size(), open]).toEqual([0, 0])
    // Calls in flight hold an entry each; past the bound the idle one touched longest ago goes.
    for (const key of ["a", "b", "c", "d"]) {
      const admission = guard.admit(key, 0)
      if (admission._tag === "Admitted" && key !== "d") guard.settle(key, admission, true, 0)
    }
    expect(guard.size()).toBe(3)
  })

  it("upstream assertions are bounded and leave once they may not be reused", async () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
    const key = {
      kid: "k",
      encodedHeader: Buffer.from(JSON.stringify({ alg: "RS256", typ: "JWT", kid: "k" })).toString("base64url"),
      privateKey: await crypto.subtle.importKey(
        "pkcs8",
        new Uint8Array(privateKey.export({ type: "pkcs8", format: "der" })),
        { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
        false,
        ["sign"]
      )
    } as never
    const assertions = makeUpstreamAssertions({ issuer: "https://auth.example", signingKeyAt: () => key, randomId: () => "id", max: 2 })
    const subjectOf = (clientId: string) => ({ profile: "p", environment: "e", uuid: "u", clientId, audience: "https://up.example/x" })
    for (const clientId of ["a", "b", "c"]) await assertions.assertionAt(subjectOf(clientId), 0)
    expect(assertions.size()).toBe(2)
    expect(assertions.sweep(REUSE_SECONDS * 1000 - 1)).toBe(0)
    expect(assertions.sweep(REUSE_SECONDS * 1000)).toBe(2)
    expect(assertions.size()).toBe(0)
  })
})

describe("metric label sets", () => {
  it("stay closed: a route or status outside the set is counted under the fallback, not as a new series", () =>
    Effect.gen(function*() {
      const seriesOf = (name: string) => Effect.map(Metric.snapshot, (pairs) => pairs.filter((pair) => pair.metricKey.name === name).length)
      const before = yield* seriesOf("service_auth_http_request_duration_seconds")
      for (let i = 0; i < 100; i++) recordDuration(`/made/up/${i}`, 0.001)
      recordServiceCall(999)
      const after = yield* seriesOf("service_auth_http_request_duration_seconds")
      expect(after - before).toBeLessThanOrEqual(1)
      const unmatched = requestDuration.unsafeValue([MetricLabel.make("route", UNMATCHED_ROUTE)])
      expect(unmatched.count).toBeGreaterThanOrEqual(100)
      expect(LABEL_SET_COUNTS.status).toBe(501)
      expect(LABEL_SET_COUNTS.route).toBeGreaterThan(10)
    }).pipe(Effect.runSync))
})
