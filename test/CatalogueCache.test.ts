/**
 * Per-entity eviction in the read cache (docs/cache-coherence.md, "What a write evicts"): a write
 * evicts its own scope and leaves every other profile's answers cached; on PostgreSQL an announced
 * change evicts its scopes only when it follows on from the last version dropped, and a gap (or a
 * change that does not say what it changed) empties everything. Negative answers are bounded apart
 * from live ones, each store evicting one entry at a time. Then, on the embedded database, the
 * catalogue loaded at start and reloaded after a write, and `last_used_at` written in batches.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, FiberRef, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { CacheLease } from "../src/catalogue/CacheLease.js"
import { CatalogueMemory } from "../src/catalogue/CatalogueMemory.js"
import { announcedScopes, parseAnnouncement } from "../src/catalogue/CatalogueScope.js"
import type { CatalogueReads, TokenTarget } from "../src/catalogue/CatalogueLookup.js"
import { Catalogue, storeOf, type WholeCatalogue, wholeOf } from "./support/Catalogue.js"
import { type ServiceAddress } from "../src/domain/ServiceAddress.js"
import { localGuard, withReadCache } from "../src/catalogue/CredentialRepoCache.js"
import { LastUse, makeLastUseBatch } from "../src/catalogue/LastUse.js"
import { CallLastUse } from "../src/catalogue/CallLastUse.js"
import * as PgliteClient from "../src/storage/PgliteClient.js"
import { type CatalogueServices, migrationsLayer } from "../src/storage/Storage.js"
import { embeddedStorage, memoryStorage } from "./support/Databases.js"
import { TEST_ACTOR } from "../src/testing.js"

const address = (profile: string, uuid = "6f1c2a4e-8b3d-4c5e-9f10-1a2b3c4d5e6f"): ServiceAddress => ({
  profile: profile as ProfileId,
  environment: "production" as EnvironmentName,
  uuid: uuid as ServiceUuid
})
const CLIENT = "svc_0123456789abcdef0123456789abcdef" as ClientId

/** A repository where every service exists and holds CLIENT, counting reads by profile. */
const countingRepo = () => {
  const reads = new Map<string, number>()
  const deleted = new Set<string>()
  const repo = {
    findTokenTarget: (at: ServiceAddress, clientId: Option.Option<ClientId>) =>
      Effect.sync(() => {
        reads.set(at.profile, (reads.get(at.profile) ?? 0) + 1)
        if (at.uuid.startsWith("0")) return Option.none() // an unknown service
        const live = Option.contains(clientId, CLIENT) && !deleted.has(at.profile)
        return Option.some<TokenTarget>({
          authType: "oauth",
          credential: live ? Option.some({ clientId: CLIENT, secretHash: "h", lastUsedAt: null }) : Option.none()
        })
      }),
    deleteService: () => Effect.succeed(true),
    deleteProfile: (profile: string) => Effect.sync(() => deleted.add(profile)).pipe(Effect.as(true)),
    putProfile: () => Effect.succeed(true),
    recordUse: () => Effect.void
  }
  return { reads, deleted, repo }
}

const target = (repo: CatalogueReads, at: ServiceAddress, clientId: ClientId = CLIENT) => repo.findTokenTarget(at, Option.some(clientId))

describe("per-entity eviction", () => {
  it.effect("a write in profile A leaves profile B's entries cached, and evicts A's", () =>
    Effect.gen(function*() {
      const { reads, deleted, repo } = countingRepo()
      const cached = wholeOf(withReadCache(storeOf(repo), localGuard()))
      yield* target(cached, address("a"))
      yield* target(cached, address("b"))
      deleted.add("a")
      yield* cached.deleteProfile("a" as ProfileId, new Date(), TEST_ACTOR)
      expect(cached.peek?.tokenTarget(address("b"), Option.some(CLIENT))).toBeDefined()
      expect(cached.peek?.tokenTarget(address("a"), Option.some(CLIENT))).toBeUndefined()
      // The deletion is seen at once: A is read again, and refused.
      const a = Option.getOrThrow(yield* target(cached, address("a")))
      expect(Option.isNone(a.credential)).toBe(true)
      yield* target(cached, address("b"))
      expect(reads.get("a")).toBe(2)
      expect(reads.get("b")).toBe(1)
      // Creating a profile changes no cached answer: nothing is evicted.
      yield* cached.putProfile("c" as ProfileId, new Date(), TEST_ACTOR)
      expect(cached.peek?.tokenTarget(address("a"), Option.some(CLIENT))).toBeDefined()
    }))

  it.effect("an announced change that follows on evicts its scopes only; a gap empties everything", () =>
    Effect.gen(function*() {
      const lease = new CacheLease(() => performance.now())
      lease.listening(1)
      lease.renewed(lease.renewalStarted())
      lease.versionRead(5n)
      const { repo, deleted } = countingRepo()
      const cached = wholeOf(
        withReadCache(storeOf(repo), {
          generation: lease.generation,
          invalidate: lease.invalidate,
          settle: Effect.void,
          onScopedChange: lease.onScopedChange
        })
      )
      const held = (profile: string) => cached.peek?.tokenTarget(address(profile), Option.some(CLIENT)) !== undefined
      yield* target(cached, address("a"))
      yield* target(cached, address("b"))
      deleted.add("a")
      expect(lease.announced(6n, [["a"]])).toBe(true)
      expect(held("a")).toBe(false)
      expect(held("b")).toBe(true)
      expect(Option.isNone(Option.getOrThrow(yield* target(cached, address("a"))).credential)).toBe(true)

      // A change that does not say what it changed: everything goes.
      expect(lease.announced(7n)).toBe(true)
      expect(held("a") || held("b")).toBe(false)
      yield* target(cached, address("a"))
      yield* target(cached, address("b"))
      // A gap (version 8 missed): its scopes cannot be trusted to be all that changed.
      expect(lease.announced(9n, [["c"]])).toBe(true)
      expect(held("a") || held("b")).toBe(false)
      yield* target(cached, address("b"))
      // A renewal reading a newer version: the same.
      expect(lease.versionRead(10n)).toBe(true)
      expect(held("b")).toBe(false)
    }))

  it.effect("a read that began before an eviction of its service stores nothing; of another service, it stores", () =>
    Effect.sync(() => {
      const memory = new CatalogueMemory<string>({ live: 10, negative: 10 })
      const before = memory.mark()
      memory.evict([["a", "production"]])
      expect(memory.store(before, "k1", "a", "production", "u", "v", true)).toBe(false)
      expect(memory.store(before, "k2", "a", "staging", "u", "v", true)).toBe(true)
      expect(memory.store(before, "k3", "b", "production", "u", "v", true)).toBe(true)
      memory.clear()
      expect(memory.store(before, "k4", "b", "production", "u", "v", true)).toBe(false)
    }))
})

describe("memory bounds", () => {
  it.effect("unknown names fill only the negative store, one entry evicted at a time; live answers stay", () =>
    Effect.gen(function*() {
      const { repo } = countingRepo()
      const cached = wholeOf(withReadCache(storeOf(repo), localGuard(), false, { live: 100, negative: 50 }))
      for (let i = 0; i < 20; i++) yield* target(cached, address(`live${i}`))
      for (let i = 0; i < 500; i++) {
        yield* target(cached, address("a", `0${randomUUID().slice(1)}`)) // unknown services
        yield* target(cached, address(`p${i}`), `svc_${String(i).padStart(32, "0")}` as ClientId) // unknown client ids
      }
      for (let i = 0; i < 20; i++) {
        expect(cached.peek?.tokenTarget(address(`live${i}`), Option.some(CLIENT))).toBeDefined()
      }
      // The most recent unknown name is held; the store never passed its bound.
      expect(cached.peek?.tokenTarget(address("p499"), Option.some(`svc_${"499".padStart(32, "0")}` as ClientId))).toBeDefined()
      expect(cached.peek?.tokenTarget(address("p0"), Option.some(`svc_${"0".padStart(32, "0")}` as ClientId))).toBeUndefined()
    }))

  it.effect("a full store evicts one entry, sparing those used since the last sweep", () =>
    Effect.sync(() => {
      const memory = new CatalogueMemory<number>({ live: 3, negative: 3 })
      for (const n of [1, 2, 3]) memory.store(memory.mark(), `k${n}`, "p", "e", `u${n}`, n, true)
      memory.get("k1")
      memory.store(memory.mark(), "k4", "p", "e", "u4", 4, true)
      expect(memory.live.size).toBe(3)
      expect(memory.get("k1")).toBe(1)
      expect(memory.get("k2")).toBeUndefined()
      expect(memory.get("k4")).toBe(4)
    }))
})

describe("announcements", () => {
  it("say the scopes after the version, widened to profiles or left out when too long", () => {
    const few = announcedScopes([["acme", "production", "u1"]])
    expect(parseAnnouncement(`12${few}`)).toEqual({ version: 12n, scopes: [["acme", "production", "u1"]] })
    const many = Array.from(
      { length: 400 },
      (_, i) => ["acme", "production", `6f1c2a4e-8b3d-4c5e-9f10-${String(i).padStart(12, "0")}`] as const
    )
    expect(parseAnnouncement(`1${announcedScopes(many)}`)).toEqual({ version: 1n, scopes: [["acme"]] })
    const profiles = Array.from({ length: 400 }, (_, i) => [`profile-${i}-${"x".repeat(20)}`] as const)
    expect(announcedScopes(profiles)).toBe("")
    expect(parseAnnouncement("3 not json")).toEqual({ version: 3n, scopes: undefined })
    expect(parseAnnouncement("nonsense")).toBeUndefined()
  })
})

const ENV = "production" as EnvironmentName
const clientId = () => `svc_${randomUUID().replaceAll("-", "")}` as ClientId

/** A new profile with an oauth echo service and one credential, written through the repository. */
const givenCredential = (repo: WholeCatalogue) =>
  Effect.gen(function*() {
    const profile = `p${randomUUID().slice(0, 8)}` as ProfileId
    const at = { profile, environment: ENV, uuid: randomUUID() as ServiceUuid }
    const now = new Date()
    yield* repo.putProfile(profile, now, TEST_ACTOR)
    yield* repo.putEnvironment(profile, ENV, now, TEST_ACTOR)
    yield* repo.putService(at, { name: "s", auth_type: "oauth", handler: { type: "echo" } }, "create", now, TEST_ACTOR)
    const id = clientId()
    yield* repo.applyCredentialChanges(
      profile,
      [{ op: "add_credential", environment: ENV, service_uuid: at.uuid, client_id: id, secret_hash: "digest" }],
      now,
      TEST_ACTOR
    )
    return { profile, at, id, now }
  })

/** The cached path over a store: the same on the embedded database and on memory (the in-process test server's). */
const cachedStore = (storage: Layer.Layer<CatalogueServices, unknown>) =>
  // As the server runs when it exports no traces (with them, uses are recorded in Effect, in spans).
  layer(storage.pipe(Layer.locally(FiberRef.currentTracerEnabled, false), Layer.orDie), { timeout: 180_000 })((it) => {
    it.effect("a service created and given credentials is in memory at its first use, and its deletion is seen at once", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
        const { profile, at, id, now } = yield* givenCredential(repo)
        // Reloaded in the background after the write: wait for it (a generous deadline).
        for (let i = 0; i < 200 && repo.peek?.tokenTarget(at, Option.some(id)) === undefined; i++) {
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
        }
        const held = repo.peek?.tokenTarget(at, Option.some(id))
        expect(held !== undefined && Option.isSome(held) && Option.isSome(held.value.credential)).toBe(true)
        expect(repo.peek?.serviceRoute(at, Option.some(id))).toEqual(
          Option.some({
            authType: "oauth",
            handler: { type: "echo" },
            credentialLive: true,
            credentialExpiresAt: null,
            rateLimit: null,
            requireDpop: false,
            upstreamApproved: false,
            upstreamOrigins: null
          })
        )

        yield* repo.applyCredentialChanges(
          profile,
          [{ op: "remove_credential", environment: ENV, service_uuid: at.uuid, client_id: id }],
          now,
          TEST_ACTOR
        )
        const after = Option.getOrThrow(yield* repo.findTokenTarget(at, Option.some(id)))
        expect(Option.isNone(after.credential)).toBe(true)
        expect((yield* repo.findServiceRoute(at, Option.some(id))).pipe(Option.getOrThrow).credentialLive).toBe(false)
      }))

    it.effect("a use recorded synchronously (recordUseSync) is in the cached entry at once and in the database after a flush", () =>
      Effect.gen(function*() {
        const repo = yield* Catalogue
        const { at, id } = yield* givenCredential(repo)
        const held = Option.getOrThrow(yield* repo.findTokenTarget(at, Option.some(id)))
        expect(Option.getOrThrow(held.credential).lastUsedAt).toBeNull()

        const used = new Date("2026-03-01T10:00:00Z")
        expect(repo.recordUseSync).toBeDefined()
        repo.recordUseSync(id, used)
        const cachedNow = repo.peek?.tokenTarget(at, Option.some(id))
        expect(cachedNow !== undefined && Option.isSome(cachedNow) && Option.getOrThrow(cachedNow.value.credential).lastUsedAt).toEqual(
          used
        )
        // An admin read flushes first, so it shows the use.
        const service = Option.getOrThrow(yield* repo.getService(at))
        expect(service.credentials.find((c) => c.client_id === id)?.last_used_at).toEqual(used)
      }))
  })

describe("embedded database", () => {
  cachedStore(embeddedStorage())
})

describe("memory storage, behind the same cache", () => {
  cachedStore(memoryStorage)
})

describe("spans", () => {
  it.scoped("with spans (traces exported) a call's use is recorded by recordUse, in its span, never synchronously", () =>
    Effect.gen(function*() {
      const synchronous: Array<string> = []
      const inEffect: Array<string> = []
      const lastUse = Layer.succeed(LastUse, {
        recordUse: (id) => Effect.sync(() => void inEffect.push(id)),
        recordUseSync: (id) => void synchronous.push(id)
      })
      const callLastUse = (traced: boolean) =>
        Effect.map(Layer.build(Layer.provide(CallLastUse.layer, lastUse)), (built) => Context.get(built, CallLastUse))
          .pipe(Effect.locally(FiberRef.currentTracerEnabled, traced))
      ;(yield* callLastUse(true)).recordCallUse(CLIENT, 0)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      expect(inEffect).toEqual([CLIENT])
      expect(synchronous).toEqual([])
      ;(yield* callLastUse(false)).recordCallUse(CLIENT, 0)
      expect(synchronous).toEqual([CLIENT])
    }))
})

describe("the catalogue load", () => {
  it.scoped("begins with the first hot read, never before: a start does not share the database with it", () =>
    Effect.gen(function*() {
      const pages: Array<number> = []
      const repo = {
        liveServices: (_scope: unknown, _after: unknown, limit: number) =>
          Effect.sync(() => {
            pages.push(limit)
            return [{
              ...address("loaded"),
              authType: "oauth",
              handler: { type: "echo" },
              credentials: [{ clientId: CLIENT, secretHash: "h", lastUsedAt: null }]
            }]
          })
      }
      const cached = withReadCache(storeOf(repo), localGuard())
      yield* Effect.forkScoped(cached.maintain)
      for (let i = 0; i < 20; i++) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
      expect(pages).toEqual([])
      // The first hot read (the fast lane's peek, here) starts it; the entry is then held.
      expect(cached.lookup.tokenTarget(address("loaded"), Option.some(CLIENT))).toBeUndefined()
      for (let i = 0; i < 400 && cached.lookup.tokenTarget(address("loaded"), Option.some(CLIENT)) === undefined; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
      }
      expect(pages.length).toBe(1)
      expect(cached.lookup.tokenTarget(address("loaded"), Option.some(CLIENT))).toBeDefined()
    }))
})

describe("last_used_at in batches", () => {
  layer(migrationsLayer.pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined }))), { timeout: 180_000 })((it) => {
    it.scoped("notes are written together by one flush, not before; the latest note wins", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const ids = [clientId(), clientId(), clientId()]
        for (const id of ids) {
          yield* sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at)
                     VALUES (${id}, 'p', 'e', 'u', 'h', ${new Date()})`
        }
        const writes = yield* makeLastUseBatch(sql)
        const t1 = new Date("2026-01-01T00:00:00Z")
        const t2 = new Date("2026-01-01T00:01:00Z")
        for (const id of ids) writes.recordUse(id, t1)
        writes.recordUse(ids[0]!, t2)
        expect(writes.pending()).toBe(3)
        expect(writes.pendingUse(ids[0]!)).toEqual(t2)
        const unwritten = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM credentials WHERE last_used_at IS NOT NULL`
        expect(unwritten[0]!.n).toBe(0)
        yield* writes.flush
        expect(writes.pending()).toBe(0)
        const rows = yield* sql<{ client_id: string; last_used_at: Date }>`
          SELECT client_id, last_used_at FROM credentials WHERE last_used_at IS NOT NULL`
        expect(new Map(rows.map((row) => [row.client_id, row.last_used_at.getTime()]))).toEqual(
          new Map([[ids[0]!, t2.getTime()], [ids[1]!, t1.getTime()], [ids[2]!, t1.getTime()]])
        )
      }))

    it.scoped("an older time never overwrites a newer one: in memory, nor in the database (GREATEST)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const id = clientId()
        const t1 = new Date("2026-01-01T00:00:00Z")
        const t2 = new Date("2026-01-01T00:05:00Z")
        yield* sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at)
                   VALUES (${id}, 'p', 'e', 'u', 'h', ${new Date()})`
        const writes = yield* makeLastUseBatch(sql)
        // A service call noted late, after a token request's later note.
        writes.recordUse(id, t2)
        writes.recordUse(id, t1)
        expect(writes.pendingUse(id)).toEqual(t2)
        yield* writes.flush
        // Another instance's batch, older than what is written.
        const other = yield* makeLastUseBatch(sql)
        other.recordUse(id, t1)
        yield* other.flush
        const rows = yield* sql<{ last_used_at: Date }>`SELECT last_used_at FROM credentials WHERE client_id = ${id}`
        expect(rows[0]!.last_used_at.getTime()).toBe(t2.getTime())
      }))
  })
})
