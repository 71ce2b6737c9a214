/**
 * The catalogue version that keeps instances' caches coherent (docs/cache-coherence.md): every
 * write of profiles, environments, services or credentials counts one change (or more) and
 * announces it at commit; a write that fails counts nothing; recording `last_used_at` is not a
 * change. On PostgreSQL, a write is acknowledged only once every other live lease has caught up
 * with it, or has run out. Several test files share the PostgreSQL database, so counts there are
 * "at least"; the exact counts are checked on the embedded database, which this file owns.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Logger, Option } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { LEASE_MS } from "../src/catalogue/CacheLease.js"
import { CatalogueQueries } from "../src/catalogue/CatalogueQueries.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import { LastUse } from "../src/catalogue/LastUse.js"
import { type ServiceAddress } from "../src/domain/ServiceAddress.js"
import { CATALOGUE_CHANNEL } from "../src/catalogue/CatalogueWritesSql.js"
import { describeWithPostgres, embeddedStorage, isolatedPostgresStorage, postgresStorage, TEST_DATABASE_URL } from "./support/Databases.js"
import { TEST_ACTOR, uniqueName } from "../src/testing.js"

const version = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => Effect.map(sql<{ version: string }>`SELECT version::text AS version FROM catalogue_version`, ([row]) => BigInt(row!.version))
)

const now = new Date()

/** What a write logs when it gave up waiting for a lease (src/catalogue/CacheCoherence.ts). */
const WAITED_OUT_A_LEASE = "a change waited out the lease of an instance that did not acknowledge it"

/** Runs `effect` and answers the messages it logged along with its result. */
const withLogged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const logged: Array<string> = []
    const collector = Logger.make(({ message }) => {
      logged.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
    })
    return Effect.map(Effect.provide(effect, Logger.add(collector)), (result) => [result, logged] as const)
  })
const clientId = () => `svc_${randomUUID().replaceAll("-", "")}` as ClientId
const fixture = () => {
  const profile = uniqueName("catalogue") as ProfileId
  const address: ServiceAddress = { profile, environment: "prod" as EnvironmentName, uuid: randomUUID() as ServiceUuid }
  return { profile, address }
}

/** Each step of a service's life, and how many changes it must count at least. */
const lifeOfAService = Effect.gen(function*() {
  const repo = yield* CatalogueWrites
  const { address, profile } = fixture()
  const id = clientId()
  const steps: Array<readonly [string, Effect.Effect<unknown, unknown>]> = [
    ["putProfile", repo.putProfile(profile, now, TEST_ACTOR)],
    ["putEnvironment", repo.putEnvironment(profile, address.environment, now, TEST_ACTOR)],
    ["putService", repo.putService(address, { name: "billing", auth_type: "oauth", handler: { type: "echo" } }, "create", now, TEST_ACTOR)],
    [
      "add credential",
      repo.applyCredentialChanges(
        profile,
        [{
          op: "add_credential",
          environment: address.environment,
          service_uuid: address.uuid,
          client_id: id,
          secret_hash: "x".repeat(64)
        }],
        now,
        TEST_ACTOR
      )
    ],
    [
      "putService (upsert)",
      repo.putService(address, { name: "billing", auth_type: "none", handler: { type: "echo" } }, "upsert", now, TEST_ACTOR)
    ],
    [
      "remove credential",
      repo.applyCredentialChanges(
        profile,
        [{ op: "remove_credential", environment: address.environment, service_uuid: address.uuid, client_id: id }],
        now,
        TEST_ACTOR
      )
    ],
    ["deleteService", repo.deleteService(address, now, TEST_ACTOR)],
    ["deleteEnvironment", repo.deleteEnvironment(profile, address.environment, now, TEST_ACTOR)],
    ["deleteProfile", repo.deleteProfile(profile, now, TEST_ACTOR)]
  ]
  return steps
})

describe("catalogue version on the embedded database", () => {
  layer(embeddedStorage())((it) => {
    it.effect("embedded: every catalogue write counts exactly one change; failures and last_used_at none", () =>
      Effect.gen(function*() {
        const repo = yield* CatalogueWrites
        for (const [name, step] of yield* lifeOfAService) {
          const before = yield* version
          yield* step
          expect(yield* version, name).toBe(before + 1n)
        }

        const { address, profile } = fixture()
        const before = yield* version
        // Refused writes roll back, their count with them.
        expect(Either.isLeft(yield* Effect.either(repo.putEnvironment(profile, "prod" as EnvironmentName, now, TEST_ACTOR)))).toBe(true)
        expect(Either.isLeft(yield* Effect.either(repo.applyCredentialChanges(profile, [], now, TEST_ACTOR)))).toBe(true)
        expect(Either.isLeft(
          yield* Effect.either(
            repo.putService(address, { name: "x", auth_type: "oauth", handler: { type: "echo" } }, "create", now, TEST_ACTOR)
          )
        )).toBe(true)
        yield* (yield* LastUse).recordUse(clientId(), now)
        expect(yield* version).toBe(before)
      }))
  })
})

describeWithPostgres("catalogue version on PostgreSQL", () => {
  layer(postgresStorage())((it) => {
    it.effect("every catalogue write is announced on the channel, with a version at least the one it committed", () =>
      Effect.gen(function*() {
        const listener = new pg.Client({ connectionString: TEST_DATABASE_URL })
        yield* Effect.promise(() => listener.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => listener.end()))
        const heard: Array<bigint> = []
        listener.on("notification", ({ channel, payload }) => {
          if (channel === CATALOGUE_CHANNEL) heard.push(BigInt(payload!))
        })
        yield* Effect.promise(() => listener.query(`LISTEN ${CATALOGUE_CHANNEL}`))

        for (const [name, step] of yield* lifeOfAService) {
          const before = yield* version
          yield* step
          const after = yield* version
          expect(after > before, name).toBe(true)
          // Delivered at commit: by the time the next statement on another connection returns.
          yield* Effect.promise(() => listener.query("SELECT 1"))
          expect(heard.some((v) => v > before && v <= after), `${name}: announced`).toBe(true)
        }
      }).pipe(Effect.scoped))
  })

  // On a database of its own: a write waits for every live lease in its database, and the servers
  // of other test files (some frozen or cut off on purpose) must not hold one here.
  layer(isolatedPostgresStorage())((it) => {
    it.effect("a write waits for a live lease that has not caught up, until it runs out; an acknowledged lease costs no wait", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* CatalogueWrites
        const laggard = `test-${randomUUID()}`
        // Another instance whose lease is valid for 800 ms and that acknowledges nothing.
        yield* sql`INSERT INTO cache_leases (instance_id, expires_at, acked_version)
                   VALUES (${laggard}, clock_timestamp() + interval '800 milliseconds', 0)`
        const { profile } = fixture()
        const started = Date.now()
        yield* repo.putProfile(profile, now, TEST_ACTOR)
        const waited = Date.now() - started
        // It returned only once the laggard's lease had run out, on the database's clock (the one
        // leases are kept on), and within the protocol's bound (the lease, plus a wide margin).
        const [lease] = yield* sql<{ expired: boolean }>`
          SELECT expires_at <= clock_timestamp() AS expired FROM cache_leases WHERE instance_id = ${laggard}`
        expect(lease?.expired, `returned after ${waited} ms, before the lease ran out`).toBe(true)
        expect(waited).toBeLessThan(LEASE_MS + 2_500)

        // The same instance, now caught up with every version there will be: no wait. Told by what
        // the write logs, not by its duration (a busy machine may take seconds over a statement):
        // the lease is valid for 5 s, so a write that waited for it would give up at its deadline
        // and log that it waited out a lease.
        yield* sql`UPDATE cache_leases SET expires_at = clock_timestamp() + interval '5 seconds',
                   acked_version = 9000000000000000000 WHERE instance_id = ${laggard}`
        const again = Date.now()
        const [, loggedUnwaited] = yield* withLogged(repo.deleteProfile(profile, now, TEST_ACTOR))
        const unwaited = Date.now() - again
        console.log(`a write waited ${waited} ms for an 800 ms lease behind it, ${unwaited} ms for an acknowledged one`)
        expect(loggedUnwaited.filter((line) => line.includes(WAITED_OUT_A_LEASE))).toEqual([])
        yield* sql`DELETE FROM cache_leases WHERE instance_id = ${laggard}`
        expect(Option.isNone(yield* (yield* CatalogueQueries).getProfile(profile))).toBe(true)
      }))
  })
})
