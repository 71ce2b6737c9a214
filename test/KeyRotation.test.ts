/**
 * Signing-key rotation (docs/contract.md §3, §5) through the real HttpApi in-process, on memory
 * storage with the live key rotation, driven by the layer's TestClock: a new key is published at
 * once and signs from `active_from`; the previous one verifies until its last token has expired
 * (3600 s + 60 s of tolerated skew after the switch), then retires. Two instances on one PostgreSQL
 * are in MultiInstanceKeys.test.ts.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, TestClock } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfig } from "../src/config/AppConfig.js"
import { KeyEncryption } from "../src/keys/KeyEncryption.js"
import { schedule, statusAt, verifiesAt } from "../src/keys/KeySchedule.js"
import { KeyService } from "../src/keys/KeyService.js"
import * as Storage from "../src/storage/Storage.js"
import { decodeJwt } from "./support/Http.js"
import { admin, createFixture, type Fixture, issueToken, type JsonResponse, makeTestServer, send, TEST_ACTOR } from "../src/testing.js"
import { callPath, callService, expectEcho, expectInvalidToken } from "./support/Tokens.js"

const kidOf = (token: string): string => decodeJwt(token).header.kid as string
const jwks = Effect.map(send(HttpClientRequest.get("/.well-known/jwks.json")), (response) => ({
  response,
  kids: (response.body.keys as Array<{ kid: string }>).map((key) => key.kid).sort()
}))
const listKeys = Effect.map(admin.get("/admin/keys"), (response) => {
  expect(response.status).toBe(200)
  return response.body.keys as Array<Record<string, unknown>>
})
const statuses = Effect.map(listKeys, (keys) => Object.fromEntries(keys.map((key) => [key.kid, key.status])))
const rotate = admin.post("/admin/keys/rotate")
const iso = (seconds: number) => new Date(seconds * 1000).toISOString()
const verifies = (fixture: Fixture, token: string) =>
  Effect.map(callService(callPath(fixture), { token }), (response) => expectEcho(response, fixture, fixture.clientId))
const refused = (fixture: Fixture, token: string) => Effect.map(callService(callPath(fixture), { token }), expectInvalidToken)
const expectError = (response: JsonResponse, status: number, error: string) => {
  expect({ status: response.status, body: response.body }).toEqual({
    status,
    body: { error, error_description: expect.any(String) }
  })
}

/** Real time (the server's clock is the TestClock): for work that takes real time, like making a key. */
const realSleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

describe("rotation with the default publication delay (300 s)", () => {
  const rotationEvents = Effect.map(
    admin.get("/admin/audit?limit=500"),
    (trail) => (trail.body.events as Array<{ readonly action: string }>).filter((event) => event.action === "key.rotated")
  )
  layer(makeTestServer({ keys: "stored" }))((it) => {
    // Generates RSA keys and walks the whole schedule: on a loaded two-core machine it has taken over 30 s.
    it.effect(
      "publishes at once, switches at active_from, keeps the old key until its last token expired, then retires it",
      () =>
        Effect.gen(function*() {
          const fixture = yield* createFixture()
          const before = yield* issueToken(fixture)
          const oldKid = kidOf(before)
          expect(yield* listKeys).toEqual([{
            kid: oldKid,
            status: "active",
            created_at: iso(0),
            active_from: iso(0),
            superseded_at: null,
            retires_at: null
          }])

          const rotated = yield* rotate
          expect(rotated.status).toBe(201)
          expect(rotated.body).toEqual({ kid: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), status: "next", active_from: iso(300) })
          const newKid: string = rotated.body.kid
          expect(newKid).not.toBe(oldKid)

          // Published at once: the JWKS has both, with a cache lifetime well within the delay.
          const published = yield* jwks
          expect(published.kids).toEqual([oldKid, newKid].sort())
          expect(published.response.headers["cache-control"]).toBe("public, max-age=60")
          expect(yield* listKeys).toEqual([
            { kid: newKid, status: "next", created_at: iso(0), active_from: iso(300), superseded_at: null, retires_at: null },
            {
              kid: oldKid,
              status: "active",
              created_at: iso(0),
              active_from: iso(0),
              superseded_at: iso(300),
              retires_at: iso(300 + 3660)
            }
          ])
          // One scheduled key at a time; the refused rotation leaves no audit event.
          expect(yield* rotationEvents).toHaveLength(1)
          expectError(yield* rotate, 409, "conflict")
          expect(yield* rotationEvents).toHaveLength(1)

          // The old key signs until active_from...
          yield* TestClock.adjust("299 seconds")
          const lastOld = yield* issueToken(fixture)
          expect(kidOf(lastOld)).toBe(oldKid)
          // ...the new one from then on, and tokens of both verify.
          yield* TestClock.adjust("1 second")
          const after = yield* issueToken(fixture)
          expect(kidOf(after)).toBe(newKid)
          for (const token of [before, lastOld, after]) yield* verifies(fixture, token)
          expect(yield* statuses).toEqual({ [newKid]: "active", [oldKid]: "retiring" })

          // The old key's last token (issued at 299 s) lives until 3899 s; the key until 3960 s.
          yield* TestClock.adjust(`${3898 - 300} seconds`)
          yield* verifies(fixture, lastOld)
          yield* verifies(fixture, after)
          yield* TestClock.adjust(`${3959 - 3898} seconds`)
          expect((yield* jwks).kids).toEqual([oldKid, newKid].sort())
          expect(yield* statuses).toEqual({ [newKid]: "active", [oldKid]: "retiring" })

          yield* TestClock.adjust("1 second")
          expect((yield* jwks).kids).toEqual([newKid])
          expect(yield* statuses).toEqual({ [newKid]: "active", [oldKid]: "retired" })
          yield* refused(fixture, lastOld)
          yield* verifies(fixture, yield* issueToken(fixture))
          // A retired key is listed, and a rotation may follow.
          expect((yield* rotate).status).toBe(201)
        }),
      120_000
    )
  })
})

describe("rotation with KEY_PUBLISH_DELAY_S=0", () => {
  layer(makeTestServer({ keys: "stored", config: { keyPublishDelaySeconds: 0 } }))((it) => {
    it.effect("the new key signs at once; tokens of the old one keep verifying", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const before = yield* issueToken(fixture)
        const rotated = yield* rotate
        expect(rotated.status).toBe(201)
        expect(rotated.body).toEqual({ kid: expect.any(String), status: "active", active_from: iso(0) })
        const after = yield* issueToken(fixture)
        expect(kidOf(after)).toBe(rotated.body.kid)
        expect(kidOf(before)).not.toBe(rotated.body.kid)
        yield* verifies(fixture, before)
        yield* verifies(fixture, after)
        expect((yield* jwks).kids).toEqual([kidOf(before), kidOf(after)].sort())
        expect((yield* jwks).response.headers["cache-control"]).toBe("public, max-age=0")
        expect(yield* statuses).toEqual({ [kidOf(after)]: "active", [kidOf(before)]: "retiring" })
        // With no delay, another rotation is allowed at once (nothing is scheduled).
        const again = yield* rotate
        expect(again.status).toBe(201)
        yield* verifies(fixture, before)
        yield* verifies(fixture, after)
        expect((yield* jwks).kids).toHaveLength(3)
      }))

    it.effect("each rotation is in the audit trail, with its actor and the new kid; a refused one is not", () =>
      Effect.gen(function*() {
        const rotated = yield* rotate
        expect(rotated.status).toBe(201)
        const trail = yield* admin.get("/admin/audit?limit=500")
        const events = (trail.body.events as Array<any>).filter((event) => event.action === "key.rotated")
        expect(events[0]).toEqual({
          time: iso(0),
          actor: "admin",
          source: expect.any(String),
          action: "key.rotated",
          profile: null,
          environment: null,
          service_uuid: null,
          client_id: null,
          details: { kid: rotated.body.kid, active_from: iso(0) }
        })
        expect(JSON.stringify(trail.body)).not.toContain("PRIVATE KEY")
      }))
  })
})

describe("KEY_ROTATION_DAYS", () => {
  // 0.01 days = 864 s; checked every minute, so due at the check of 900 s.
  layer(makeTestServer({ keys: "stored", config: { keyRotationDays: Option.some(0.01) } }))((it) => {
    it.effect("rotates once the active key is older, on the same schedule as a manual rotation", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const first = kidOf(yield* issueToken(fixture))
        yield* TestClock.adjust("840 seconds")
        expect(yield* listKeys).toHaveLength(1)
        yield* TestClock.adjust("60 seconds")
        // Making the key takes real time: seconds on a busy machine (polled, for up to 60 s).
        let keys = yield* listKeys
        for (const deadline = Date.now() + 60_000; keys.length < 2 && Date.now() < deadline;) {
          yield* realSleep(50)
          keys = yield* listKeys
        }
        expect(keys.map((key) => [key.status, key.active_from])).toEqual([["next", iso(1200)], ["active", iso(0)]])
        const trail = yield* admin.get("/admin/audit?limit=500")
        expect((trail.body.events as Array<any>).filter((event) => event.action === "key.rotated")).toEqual([
          expect.objectContaining({
            actor: "key-rotation-schedule",
            source: "server",
            details: { kid: keys[0]!.kid, active_from: iso(1200) }
          })
        ])
        yield* TestClock.adjust("300 seconds")
        const second = kidOf(yield* issueToken(fixture))
        expect(second).toBe(keys[0]!.kid)
        expect(second).not.toBe(first)
        // Not again until the new key is as old.
        yield* TestClock.adjust("600 seconds")
        yield* realSleep(100)
        expect(yield* statuses).toEqual({ [second]: "active", [first]: "retiring" })
      }), 120_000)
  })
})

describe("SIGNING_KEY_FILE", () => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-keyfile-"))
  const file = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(file, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })

  layer(makeTestServer({ keys: "stored", config: { signingKeyFile: Option.some(file) } }))((it) => {
    it.effect("POST /admin/keys/rotate → 409 conflict; the file's key is listed active", () =>
      Effect.gen(function*() {
        const refusedRotation = yield* rotate
        expectError(refusedRotation, 409, "conflict")
        expect(refusedRotation.body.error_description).toMatch(/SIGNING_KEY_FILE/)
        const { kids } = yield* jwks
        expect(kids).toHaveLength(1)
        const keys = yield* listKeys
        expect(keys).toEqual([{
          kid: kids[0],
          status: "active",
          created_at: expect.any(String),
          active_from: expect.any(String),
          superseded_at: null,
          retires_at: null
        }])
        const fixture = yield* createFixture()
        expect(kidOf(yield* issueToken(fixture))).toBe(kids[0])
      }))
  })
})

describe("the key endpoints need the admin token", () => {
  layer(makeTestServer({ keys: "stored" }))((it) => {
    it.effect("GET /admin/keys and POST /admin/keys/rotate → 401 unauthorized without it or with another", () =>
      Effect.gen(function*() {
        for (const authorization of [undefined, "Bearer not-the-admin-token", "Basic dGVzdDp0ZXN0"]) {
          for (const request of [HttpClientRequest.get("/admin/keys"), HttpClientRequest.post("/admin/keys/rotate")]) {
            const response = yield* send(
              authorization === undefined ? request : HttpClientRequest.setHeader(request, "authorization", authorization)
            )
            expectError(response, 401, "unauthorized")
          }
        }
        expect(yield* listKeys).toHaveLength(1)
      }))
  })
})

describe("two instances on one store (memory)", () => {
  const instance = (stores: Layer.Layer<Layer.Layer.Success<typeof Storage.layerMemory>>) =>
    Effect.map(
      Layer.build(KeyService.layer.pipe(
        Layer.provide(Layer.mergeAll(stores, KeyEncryption.layerNone, AppConfig.layerTest({ keyPublishDelaySeconds: 0 })))
      )),
      Context.get(KeyService)
    )

  it.scoped("a key rotated on one with no delay is learnt by the other from its first token's kid", () =>
    Effect.gen(function*() {
      const stores = Layer.succeedContext(
        yield* Layer.build(Storage.layerMemory)
      )
      const a = yield* instance(stores)
      const b = yield* instance(stores)
      const first = a.signingKeyAt(0).kid
      expect(b.signingKeyAt(0).kid).toBe(first)
      const rotated = yield* a.rotate(TEST_ACTOR)
      expect(a.signingKeyAt(0).kid).toBe(rotated.kid)
      // B has not reloaded yet: it does not hold the key, until a token names it.
      expect(b.verificationKeyAt(rotated.kid, 0)).toBeUndefined()
      yield* b.learn(rotated.kid)
      expect(b.verificationKeyAt(rotated.kid, 0)).toBeDefined()
      expect(b.verificationKeyAt(first, 0)).toBeDefined()
      expect(b.signingKeyAt(0).kid).toBe(rotated.kid)
      expect((yield* b.jwks).keys.map((key) => key.kid).sort()).toEqual([first, rotated.kid].sort())
      // Garbage kids never reach the store.
      yield* b.learn("not-a-kid")
    }))
})

describe("the schedule (KeySchedule)", () => {
  const at = (seconds: number) => seconds * 1000
  const keys = [
    { kid: "c", activeFrom: at(500), position: 3 },
    { kid: "a", activeFrom: at(0), position: 1 },
    { kid: "b", activeFrom: at(100), position: 2 }
  ]
  const statusesAt = (seconds: number) =>
    Object.fromEntries(schedule(keys).map((scheduled) => [scheduled.key.kid, statusAt(scheduled, at(seconds))]))

  it("orders by active_from; each key is superseded by the next and retires 3660 s later", () => {
    expect(schedule(keys).map((s) => [s.key.kid, s.supersededAt, s.retiresAt])).toEqual([
      ["a", at(100), at(3760)],
      ["b", at(500), at(4160)],
      ["c", undefined, undefined]
    ])
    expect(statusesAt(50)).toEqual({ a: "active", b: "next", c: "next" })
    expect(statusesAt(100)).toEqual({ a: "retiring", b: "active", c: "next" })
    expect(statusesAt(500)).toEqual({ a: "retiring", b: "retiring", c: "active" })
    expect(statusesAt(3760)).toEqual({ a: "retired", b: "retiring", c: "active" })
    expect(statusesAt(4160)).toEqual({ a: "retired", b: "retired", c: "active" })
    expect(schedule(keys).map((s) => verifiesAt(s, at(3759)))).toEqual([true, true, true])
    expect(schedule(keys).map((s) => verifiesAt(s, at(3760)))).toEqual([false, true, true])
  })

  it("of two keys starting at the same moment, the one added later signs", () => {
    const tied = [{ kid: "z", activeFrom: 0, position: 2 }, { kid: "y", activeFrom: 0, position: 1 }]
    expect(schedule(tied).map((s) => [s.key.kid, statusAt(s, 0)])).toEqual([["y", "retiring"], ["z", "active"]])
  })
})
