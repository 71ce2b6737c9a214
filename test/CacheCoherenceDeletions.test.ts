/**
 * Coherence across instances (docs/contract.md §2: "A deletion acknowledged by any instance makes
 * every instance refuse that credential's tokens from the next request on"), black-box over HTTP, so
 * that it holds whatever an instance keeps in memory.
 * Here every kind of deletion (a credential DELETE, a `save` that removes it, deleting its
 * service, its environment or its profile, switching its service's `auth_type` away from `oauth`)
 * through every instance, on warm entries: refused everywhere at once, nothing else touched; and a
 * healthy cluster acknowledges deletions without waiting out a lease.
 *
 * Three real `npm start` processes on one PostgreSQL database of their own, and a fourth behind a
 * TCP proxy (test/support/CoherenceCluster.ts). Needs TEST_DATABASE_URL (always set by .ci/run).
 * No assertion depends on how fast the machine is: acknowledgements are held to the protocol's bound
 * (the lease, plus a wide margin) and their latencies are printed, not compared.
 */
import { describe, expect, it } from "vitest"
import { coherenceCluster } from "./support/CoherenceCluster.js"
import {
  DATABASE_URL,
  ACK_WITHIN_MS,
  WAITED_OUT_A_LEASE,
  describeAnswer,
  admin,
  adminPath,
  createProfile,
  createService,
  addCredential,
  expectLive,
  warm,
  warmAll,
  expectRefused,
  type Instance,
  type Answer,
  type Service,
  type Credential,
  type Fate
} from "./support/CoherenceRequests.js"

describe.skipIf(DATABASE_URL === undefined)("cache coherence: every kind of deletion on three instances", () => {
  const { cluster } = coherenceCluster()

  // ---------------------------------------------------------------------------------------------
  // Every kind of deletion, through every instance.

  /**
   * A fresh profile P with prod/S (A, B), prod/T (C) and staging/U (D), and a fresh profile Q with
   * prod/W (E): for every deletion, credentials just inside and just outside its scope.
   */
  const buildWorld = async (via: Instance) => {
    const profile = await createProfile(via, ["prod", "staging"])
    const other = await createProfile(via, ["prod"])
    const s = await createService(via, profile, "prod")
    const t = await createService(via, profile, "prod")
    const u = await createService(via, profile, "staging")
    const w = await createService(via, other, "prod")
    const credentials = {
      a: await addCredential(via, s, "A (P/prod/S)"),
      b: await addCredential(via, s, "B (P/prod/S)"),
      c: await addCredential(via, t, "C (P/prod/T)"),
      d: await addCredential(via, u, "D (P/staging/U)"),
      e: await addCredential(via, w, "E (Q/prod/W)")
    }
    return { profile, s, t, credentials }
  }
  type World = Awaited<ReturnType<typeof buildWorld>>

  interface Deletion {
    readonly name: string
    readonly acknowledged: number
    readonly run: (via: Instance, world: World) => Promise<Answer>
    /** What the deletion leaves of a credential: a fate, or undefined when it must keep working. */
    readonly fate: (credential: Credential, world: World) => Fate | undefined
  }

  const inService = (credential: Credential, service: Service) =>
    credential.service.profile === service.profile && credential.service.environment === service.environment &&
    credential.service.uuid === service.uuid

  const DELETIONS: ReadonlyArray<Deletion> = [
    {
      name: "credential DELETE",
      acknowledged: 204,
      run: (via, world) => admin(via, "DELETE", `${adminPath(world.s)}/credentials/${world.credentials.a.client_id}`),
      fate: (credential, world) => (credential.client_id === world.credentials.a.client_id ? "revoked" : undefined)
    },
    {
      name: "save with remove_credential",
      acknowledged: 200,
      run: (via, world) =>
        admin(via, "POST", `/admin/profiles/${world.profile}/save`, {
          changes: [{
            op: "remove_credential",
            environment: world.s.environment,
            service_uuid: world.s.uuid,
            client_id: world.credentials.a.client_id
          }]
        }),
      fate: (credential, world) => (credential.client_id === world.credentials.a.client_id ? "revoked" : undefined)
    },
    {
      name: "service DELETE",
      acknowledged: 204,
      run: (via, world) => admin(via, "DELETE", adminPath(world.s)),
      fate: (credential, world) => (inService(credential, world.s) ? "service gone" : undefined)
    },
    {
      name: "auth_type switched to none",
      acknowledged: 200,
      run: (via, world) => admin(via, "PUT", adminPath(world.s), { name: "billing", auth_type: "none" }),
      fate: (credential, world) => (inService(credential, world.s) ? "service open" : undefined)
    },
    {
      name: "environment DELETE",
      acknowledged: 204,
      run: (via, world) => admin(via, "DELETE", `/admin/profiles/${world.profile}/environments/prod`),
      fate: (credential, world) =>
        credential.service.profile === world.profile && credential.service.environment === "prod"
          ? "service gone"
          : undefined
    },
    {
      name: "profile DELETE",
      acknowledged: 204,
      run: (via, world) => admin(via, "DELETE", `/admin/profiles/${world.profile}`),
      fate: (credential, world) => (credential.service.profile === world.profile ? "service gone" : undefined)
    }
  ]

  /** One deletion through one instance, on a fresh world built through another. */
  const deleteThrough = async (deletion: Deletion, i: number) => {
    const { instances } = cluster
    const deleter = instances[i]!
    const world = await buildWorld(instances[(i + 1) % 3]!)
    const all = Object.values(world.credentials)
    await warmAll(instances, all)

    // An addition through one instance works on the others at once (T's entries are warm, with C only).
    const f = await addCredential(deleter, world.t, "F (P/prod/T, added)")
    for (const other of instances) if (other !== deleter) await expectLive(other, f)
    const credentials = [...all, f]

    const ack = await deletion.run(deleter, world)
    expect(ack.status, describeAnswer(ack)).toBe(deletion.acknowledged)

    // On every instance, the very next requests: the deleted first, then the bystanders.
    const doomed = credentials.filter((c) => deletion.fate(c, world) !== undefined)
    const bystanders = credentials.filter((c) => deletion.fate(c, world) === undefined)
    expect(doomed.length).toBeGreaterThan(0)
    expect(bystanders.length).toBeGreaterThan(0)
    await Promise.all(instances.map(async (instance) => {
      for (const credential of doomed) await expectRefused(instance, credential, deletion.fate(credential, world)!)
      for (const credential of bystanders) await expectLive(instance, credential)
    }))
  }

  it("every kind of deletion, through every instance: refused everywhere at once, nothing else touched", async () => {
    const { instances } = cluster
    for (const deletion of DELETIONS) {
      // Through the three instances at once, on three worlds: concurrent writers, and a third of the time.
      const rounds = await Promise.allSettled([0, 1, 2].map((i) => deleteThrough(deletion, i)))
      for (const [i, round] of rounds.entries()) {
        if (round.status === "fulfilled") continue
        // Which of the 18 rounds failed.
        const error = round.reason
        if (error instanceof Error) error.message = `${deletion.name} through ${instances[i]!.name}: ${error.message}`
        throw error
      }
    }
  }, 240_000)

  // ---------------------------------------------------------------------------------------------
  // Latency of a deletion in a healthy cluster.

  it("a healthy cluster acknowledges deletions without waiting out a lease (20 deletions, rotating instances)", async () => {
    const { instances } = cluster
    const waitedOut = () => instances.map((instance) => instance.server.log().split(WAITED_OUT_A_LEASE).length - 1)
    const waitedBefore = waitedOut()
    const profile = await createProfile(instances[0]!, ["prod"])
    const service = await createService(instances[0]!, profile, "prod")
    const b = await addCredential(instances[0]!, service, "B")
    const latencies: Array<number> = []
    for (let k = 0; k < 20; k++) {
      const adder = instances[k % 3]!
      const deleter = instances[(k + 1) % 3]!
      const x = await addCredential(adder, service, `X${k}`)
      await Promise.all(instances.map((instance) => warm(instance, [x], 1)))
      const ack = await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${x.client_id}`)
      expect(ack.status, describeAnswer(ack)).toBe(204)
      latencies.push(ack.end - ack.start)
      await Promise.all(instances.map((instance) => expectRefused(instance, x, "revoked")))
    }
    for (const instance of instances) await expectLive(instance, b)

    const sorted = [...latencies].sort((x, y) => x - y)
    const percentile = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
    const waited = waitedOut().reduce((sum, count, i) => sum + count - waitedBefore[i]!, 0)
    // The latencies are a figure to read, not to assert: on a busy machine an instance can be kept
    // off the CPU for as long as a lease, and then the deleter rightly waits it out.
    console.log(
      `deletion acknowledgement, healthy cluster of 3: p50 ${percentile(50).toFixed(1)} ms, ` +
        `p99 ${percentile(99).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms (n=${sorted.length}); ` +
        `${waited} of them waited out a lease`
    )
    // The protocol's bound holds for every one...
    expect(latencies.filter((ms) => ms >= ACK_WITHIN_MS).map(Math.round), `acknowledgements not within ${ACK_WITHIN_MS} ms`)
      .toEqual([])
    // ...and the instances do acknowledge: were the acknowledgements lost, every deletion would
    // wait out the lease (and say so in the deleter's log).
    expect(waited, "deletions that waited out a lease").toBeLessThan(latencies.length)
  }, 90_000)
})
