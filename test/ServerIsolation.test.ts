/**
 * Two servers built in one process share nothing: each has its own request ids, OpenAPI document,
 * signing key and tracer (sampler, ids, exporter), made when it is built and gone when it is
 * dropped; a server built after another was dropped starts from nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { KeyService } from "../src/keys/KeyService.js"
import { RequestIds } from "../src/server/RequestId.js"
import { ServedOpenApi } from "../src/server/ServedOpenApi.js"
import { startRequestSpan } from "../src/observability/LaneTrace.js"
import * as TracingOtlp from "../src/observability/TracingOtlp.js"
import type { TracingSettings } from "../src/observability/TracingSettings.js"
import { PgliteWarmed } from "../src/storage/PgliteClient.js"
import { makeTestServer } from "../src/testing.js"
import { startOtlpSink } from "./support/OtlpSink.js"

/** A server built in a scope of its own, and what it holds. */
const build = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(makeTestServer(), scope)
  return {
    scope,
    ids: Context.get(context, RequestIds),
    openApi: Context.get(context, ServedOpenApi),
    keys: Context.get(context, KeyService)
  }
})

describe("two servers in one process", () => {
  it.live("have their own request ids, OpenAPI document and signing key, and leave nothing behind", () =>
    Effect.gen(function*() {
      const a = yield* build
      const b = yield* build
      expect(a.ids).not.toBe(b.ids)
      // One request object seen by both: each server keeps the id the first one gave it.
      const request = {}
      expect(a.ids(request)).toBe(b.ids(request))
      const fresh = Array.from({ length: 100 }, () => [a.ids(undefined), b.ids(undefined)]).flat()
      expect(new Set(fresh).size).toBe(200)

      yield* a.openApi.yaml
      expect(a.openApi.built()).toBe(true)
      expect(b.openApi.built()).toBe(false)

      const kidOf = (keys: typeof a.keys) => keys.signingKeyAt(0).kid
      expect(kidOf(a.keys)).not.toBe(kidOf(b.keys))

      yield* Scope.close(a.scope, Exit.void)
      yield* Scope.close(b.scope, Exit.void)
      const c = yield* build
      expect(c.openApi.built()).toBe(false)
      expect(kidOf(c.keys)).not.toBe(kidOf(a.keys))
      yield* Scope.close(c.scope, Exit.void)
    }), 60_000)

  it.live("hand PGlite's warm-up to their own first database only", () =>
    Effect.gen(function*() {
      const warming = { wasmModule: Promise.reject(new Error("not warmed")), fsBundle: Promise.resolve(Buffer.from("x")) }
      warming.wasmModule.catch(() => {})
      const takeTwice = Effect.gen(function*() {
        const warmed = Context.get(yield* Layer.build(PgliteWarmed.layer(warming)), PgliteWarmed)
        return [yield* Effect.promise(warmed.take), yield* Effect.promise(warmed.take)]
      }).pipe(Effect.scoped)
      const [first, second] = yield* takeTwice
      expect(Object.keys(first!)).toEqual(["fsBundle"])
      expect(second).toEqual({})
      // Another server is given its own.
      const [other] = yield* takeTwice
      expect(Object.keys(other!)).toEqual(["fsBundle"])
    }))

  it.live("have their own tracer: sampler, ids and exporter, each flushed and closed with its server", () =>
    Effect.gen(function*() {
      const sink = yield* Effect.acquireRelease(Effect.promise(startOtlpSink), (s) => Effect.promise(s.close))
      const settings = (name: "always_on" | "always_off", serviceName: string): TracingSettings => ({
        tracesUrl: `${sink.endpoint}/v1/traces`,
        protocol: "http/json",
        serviceName,
        sampler: { name, ratio: 1 },
        headers: {},
        compression: "none",
        timeoutMillis: 5_000,
        scheduleDelayMillis: 600_000,
        maxBatchSize: 10_000,
        tls: {},
        resourceAttributes: {},
        ignored: []
      })
      const scopeOn = yield* Scope.make()
      const scopeOff = yield* Scope.make()
      // Each tracer is read inside the scope its layer was built in.
      const on = yield* Effect.flatMap(Layer.buildWithScope(TracingOtlp.layer(settings("always_on", "server-on")), scopeOn), (context) =>
        Effect.provide(Effect.tracer, context))
      const off = yield* Effect.flatMap(
        Layer.buildWithScope(TracingOtlp.layer(settings("always_off", "server-off")), scopeOff),
        (context) =>
          Effect.provide(Effect.tracer, context)
      )
      expect(on).not.toBe(off)
      const facts = {
        method: "POST",
        route: "/oauth/token",
        path: "/oauth/token",
        encrypted: false,
        clientAddress: () => undefined,
        caller: undefined
      }
      const spanOn = startRequestSpan(on, facts, 1n)
      const spanOff = startRequestSpan(off, facts, 1n)
      expect(spanOn.sampled).toBe(true)
      expect(spanOff.sampled).toBe(false)
      expect(spanOff.traceId).not.toBe(spanOn.traceId)
      spanOn.end(2n, Exit.void)
      spanOff.end(2n, Exit.void)
      yield* Scope.close(scopeOff, Exit.void)
      expect(sink.spans()).toHaveLength(0)
      yield* Scope.close(scopeOn, Exit.void)
      const spans = sink.spans()
      expect(spans.map((s) => [s.name, s.resource["service.name"]])).toEqual([["POST /oauth/token", "server-on"]])
    }).pipe(Effect.scoped))
})
