/**
 * The repository suite on PostgreSQL alone: interleavings only a server with concurrent sessions
 * allows (the memory store and PGlite run one operation or transaction at a time).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Schedule } from "effect"
import type { ServiceAddress } from "../src/domain/ServiceAddress.js"
import type { CatalogueServices } from "../src/storage/Storage.js"
import { TEST_ACTOR } from "../src/testing.js"
import { Catalogue } from "./support/Catalogue.js"
import { describeWithPostgres, isolatedPostgresStorage } from "./support/Databases.js"
import { add, ECHO, givenService, liveClientIds, liveness, newClientId, newProfile, T0, T1, T2, T3 } from "./support/RepoSuite.js"

describeWithPostgres("PostgreSQL", () => {
  /**
   * Interleavings only a server with concurrent sessions allows (the memory store and PGlite run one
   * operation or transaction at a time). Each test forces its interleaving with row locks held by
   * other sessions, so it is deterministic; on a database of its own, so that no other test file's
   * session joins the lock queues it reads.
   */
  layer(isolatedPostgresStorage(), { excludeTestServices: true })("CredentialRepo (PostgreSQL interleavings)", (it) => {
    /** The pid of a backend that waits for a lock held by `blocker`. */
    const waiterOf = (blocker: number) =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE ${blocker} = ANY (pg_blocking_pids(pid))`
      ).pipe(
        Effect.flatMap((rows) => rows.length === 1 ? Effect.succeed(rows[0]!.pid) : Effect.fail(`waiters of ${blocker}: ${rows.length}`)),
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")))
      )

    /**
     * Runs `deletion` while an addition to `address` is between its service lock and its commit:
     * a third session inserts the added client id uncommitted, so the addition, holding its lock
     * on the service row, waits on that insert; the deletion starts, and waits for the addition's
     * lock; then the third session rolls back and both complete.
     */
    const deleteDuringAddition = <A, E>(address: ServiceAddress, deletion: Effect.Effect<A, E, CatalogueServices>) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* Catalogue
        const clientId = newClientId()
        const blockerPid = yield* Deferred.make<number, unknown>()
        const release = yield* Deferred.make<void>()
        const blocker = yield* sql.withTransaction(Effect.gen(function*() {
          const pid = (yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`)[0]!.pid
          yield* sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at)
                     VALUES (${clientId}, ${newProfile()}, 'blocker', 'blocker', 'blocker', ${T0})`
          yield* Deferred.succeed(blockerPid, pid)
          yield* Deferred.await(release)
          return yield* Effect.fail("roll back" as const)
        })).pipe(
          Effect.tapErrorCause((cause) => Deferred.failCause(blockerPid, cause)),
          Effect.exit,
          Effect.fork
        )

        return yield* Effect.gen(function*() {
          // The blocking insert is in place before the addition starts.
          const blockingPid = yield* Deferred.await(blockerPid)
          const addition = yield* Effect.fork(Effect.exit(
            repo.applyCredentialChanges(address.profile, [add(address.environment, address.uuid, clientId)], T1, TEST_ACTOR)
          ))
          const additionPid = yield* waiterOf(blockingPid)
          const deleting = yield* Effect.fork(Effect.exit(deletion))
          yield* waiterOf(additionPid)
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(blocker)
          const added = yield* Fiber.join(addition)
          const deleted = yield* Fiber.join(deleting)
          return { clientId, added, deleted }
        }).pipe(
          // Whatever happens, end the blocking session first, so no statement waits on it forever.
          Effect.ensuring(Effect.andThen(Deferred.succeed(release, undefined), Fiber.await(blocker)))
        )
      })

    // A deletion that tombstoned before taking the locks a save takes would miss a credential
    // whose save locked the service earlier and commits in between: the deletion would answer
    // true, the credential would stay live, and would verify again as soon as the service is
    // re-created under the same uuid.
    const deletions: ReadonlyArray<[string, (address: ServiceAddress) => Effect.Effect<boolean, unknown, CatalogueServices>]> = [
      ["deleteService", (address) => Effect.flatMap(Catalogue, (repo) => repo.deleteService(address, T2, TEST_ACTOR))],
      [
        "deleteEnvironment",
        (address) => Effect.flatMap(Catalogue, (repo) => repo.deleteEnvironment(address.profile, address.environment, T2, TEST_ACTOR))
      ],
      ["deleteProfile", (address) => Effect.flatMap(Catalogue, (repo) => repo.deleteProfile(address.profile, T2, TEST_ACTOR))]
    ]
    for (const [method, deletion] of deletions) {
      it.effect(`${method} concurrent with an addition leaves no live credential behind`, () =>
        Effect.gen(function*() {
          const repo = yield* Catalogue
          const address = yield* givenService()
          const { added, clientId, deleted } = yield* deleteDuringAddition(address, deletion(address))
          // The interleaving happened as intended: both operations went through.
          expect(Exit.isSuccess(added)).toBe(true)
          expect(deleted).toEqual(Exit.succeed(true))
          yield* repo.putProfile(address.profile, T3, TEST_ACTOR)
          yield* repo.putEnvironment(address.profile, address.environment, T3, TEST_ACTOR)
          yield* repo.putService(address, { name: "again", auth_type: "oauth", handler: ECHO }, "upsert", T3, TEST_ACTOR)
          expect(yield* liveness(address, clientId)).toEqual({ token: false, route: false })
          expect(yield* liveClientIds(address)).toEqual([])
        }))
    }
  })
})
