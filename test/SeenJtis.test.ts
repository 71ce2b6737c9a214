/**
 * Seen JWT ids on the embedded database (`SeenJtis`, `SoleWriter`): checked in memory, written
 * behind to `seen_jtis` and read back at start, so a restart on the same DATA_DIR refuses an id
 * accepted before it (a replay window never opens); memory full of unexpired ids falls back on the
 * table; and a server restarted on its DATA_DIR refuses a client assertion its predecessor accepted.
 * (A replay on another instance sharing PostgreSQL: PrivateKeyJwt.test.ts.)
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { makeTestServer, tokenRequest } from "../src/testing.js"
import { addKeyCredential, assertion, clientKey, createService, JWT_BEARER, targetOf } from "./support/ClientKeys.js"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeSoleWriter, SeenJtis, SoleWriter } from "../src/token/SeenJtis.js"
import * as Storage from "../src/storage/Storage.js"

const dataDir = mkdtempSync(join(tmpdir(), "seen-jtis-"))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** The live layer on the embedded database in `dir` (undefined: in memory), as the server builds it. */
const embedded = (dir: string | undefined) =>
  SeenJtis.layer.pipe(Layer.provideMerge(Layer.merge(Storage.layerMigrated(Storage.layerEmbeddedClient(dir)), SoleWriter.layer)))

const inScope = <A, E>(dir: string | undefined, use: Effect.Effect<A, E, SeenJtis | SqlClient.SqlClient>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(use, embedded(dir))))

const claim = (jti: string, forMillis = 60_000) =>
  Effect.flatMap(SeenJtis, (seen) => seen.claim("dpop:key", jti, Date.now() + forMillis, Date.now()))

describe("SeenJtis on the embedded database", () => {
  it("refuses, after a restart on the same data directory, an id accepted just before it", async () => {
    const first = await inScope(dataDir, Effect.all([claim("a"), claim("a"), claim("short", 300)]))
    expect(first).toEqual([true, false, true])
    // Closed at once: the ids were written when the scope ended, not by the periodic flush.
    await new Promise((resolve) => setTimeout(resolve, 400))
    const second = await inScope(
      dataDir,
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM seen_jtis`
        return [yield* claim("a"), yield* claim("b"), yield* claim("short"), rows[0]!.n]
      })
    )
    // "short" expired while the server was down: accepted again; its row was purged at start.
    expect(second).toEqual([false, true, true, 1])
  }, 60_000)

  it("writes accepted ids behind, within about a tenth of a second", async () => {
    const rows = await inScope(
      undefined,
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* claim("c")
        yield* claim("d")
        const before = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM seen_jtis`
        yield* Effect.sleep("400 millis")
        const after = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM seen_jtis`
        return [before[0]!.n, after[0]!.n]
      })
    )
    expect(rows).toEqual([0, 2])
  }, 60_000)

  it("with memory full of unexpired ids, refuses an evicted one from the table and claims new ones there", async () => {
    // The database outlives the scope of the ids (as the server's storage does): their last write finds it open.
    const results = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const seen = yield* makeSoleWriter(sql, 2)
        const at = (jti: string) => seen.claim("client_assertion:svc", jti, Date.now() + 60_000, Date.now())
        const out = [yield* at("e1"), yield* at("e2"), yield* at("e3")] // e1 leaves memory, unexpired
        out.push(yield* at("e1")) // still waiting to be written: refused
        yield* Effect.sleep("400 millis") // written
        out.push(yield* at("e1"), yield* at("e4"), yield* at("e4"), yield* at("e2"))
        return out
      })).pipe(Effect.provide(Storage.layerMigrated(Storage.layerEmbeddedClient(undefined))))
    )
    expect(results).toEqual([true, true, true, false, false, true, false, false])
  }, 60_000)
})

describe("SeenJtis in memory, full", () => {
  it("drops expired ids first, then the oldest; the sole writer's memory is bounded the same way", async () => {
    // The database outlives the scope of the ids (as the server's storage does): their last write finds it open.
    const results = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const seen = yield* makeSoleWriter(sql, 3)
        const at = (jti: string, until: number, now: number) => seen.claim("dpop:k", jti, until, now)
        const now = Date.now()
        // f1 expires first; when memory is full it goes without sending claims to the table.
        const out = [yield* at("f1", now + 1000, now), yield* at("f2", now + 60_000, now), yield* at("f3", now + 60_000, now)]
        out.push(yield* at("f4", now + 60_000, now + 2000)) // room made by dropping the expired f1
        out.push(yield* at("f1", now + 60_000, now + 2000)) // f1 expired: accepted again
        out.push(yield* at("f2", now + 60_000, now + 2000)) // evicted unexpired by f1, still refused
        return out
      })).pipe(Effect.provide(Storage.layerMigrated(Storage.layerEmbeddedClient(undefined))))
    )
    expect(results).toEqual([true, true, true, true, true, false])
  }, 60_000)
})

describe("a server restarted on the same DATA_DIR", () => {
  const serverDir = mkdtempSync(join(tmpdir(), "seen-jtis-server-"))
  afterAll(() => rmSync(serverDir, { recursive: true, force: true }))
  // Each run is a server on the embedded database in serverDir, stopped (gracefully) at its end.
  const onServer = <A, E>(use: Effect.Effect<A, E, any>) =>
    Effect.runPromise(
      Effect.scoped(Effect.provide(use, makeTestServer({ storage: Storage.layerEmbedded(serverDir) }))) as Effect.Effect<A, E>
    )

  it("refuses the client assertion the previous process accepted (a replay across a restart)", async () => {
    const { jwt, service } = await onServer(Effect.gen(function*() {
      const service = yield* createService()
      const key = yield* Effect.promise(() => clientKey("EC"))
      const created = yield* addKeyCredential(service, key.publicJwk)
      const jwt = yield* Effect.promise(() => assertion(key, created.body.client_id, "http://issuer.test", {}, Date.now()))
      const request = { ...targetOf(service), client_assertion_type: JWT_BEARER, client_assertion: jwt }
      expect((yield* tokenRequest(request)).status).toBe(200)
      expect((yield* tokenRequest(request)).status).toBe(401)
      return { jwt, service }
    }))
    const replayed = await onServer(tokenRequest({ ...targetOf(service), client_assertion_type: JWT_BEARER, client_assertion: jwt }))
    expect({ status: replayed.status, body: replayed.body }).toEqual({
      status: 401,
      body: {
        error: "invalid_client",
        error_description: "Invalid client credentials: the assertion's jti was used before (each assertion needs a new jti)"
      }
    })
  }, 120_000)
})
