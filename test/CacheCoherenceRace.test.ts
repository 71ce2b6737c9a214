/**
 * Coherence across instances (docs/contract.md §2: "A deletion acknowledged by any instance makes
 * every instance refuse that credential's tokens from the next request on"), black-box over HTTP, so
 * that it holds whatever an instance keeps in memory.
 * Here a deletion races loops of calls and token requests on three instances: every request
 * started after the acknowledgement is refused as a deleted credential's, what finished before it
 * was sent was accepted, and a bystander on the same service never notices.
 *
 * Three real `npm start` processes on one PostgreSQL database of their own, and a fourth behind a
 * TCP proxy (test/support/CoherenceCluster.ts). Needs TEST_DATABASE_URL (always set by .ci/run).
 * No assertion depends on how fast the machine is: acknowledgements are held to the protocol's bound
 * (the lease, plus a wide margin) and their latencies are printed, not compared.
 */
import { performance } from "node:perf_hooks"
import { describe, expect, it } from "vitest"
import { coherenceCluster } from "./support/CoherenceCluster.js"
import {
  DATABASE_URL,
  describeAnswer,
  admin,
  adminPath,
  requestToken,
  callService,
  warmAll,
  pollUntil,
  type Instance,
  type Answer
} from "./support/CoherenceRequests.js"

describe.skipIf(DATABASE_URL === undefined)("cache coherence: a deletion racing in-flight calls", () => {
  const { cluster, buildPair } = coherenceCluster()

  // ---------------------------------------------------------------------------------------------
  // Deletions racing in-flight calls.

  it("a deletion racing in-flight calls: every request started after the acknowledgement is refused", async () => {
    const { instances } = cluster
    const deleter = instances[2]!
    const { service, a, b } = await buildPair(deleter)
    await warmAll(instances, [a, b])

    interface Sample {
      readonly kind: "A call" | "A token" | "B call"
      readonly answer: Answer
    }
    const samples: Array<Sample> = []
    /** Each side of the race needs this many of A's requests on every instance (and B some). */
    const ENOUGH = 10
    /** A generous deadline for either side to get them, however slow the machine. */
    const SIDE_WITHIN_MS = 15_000
    const count = (instance: Instance, matches: (sample: Sample) => boolean) =>
      samples.filter((s) => s.answer.label.startsWith(`${instance.name}:`) && matches(s)).length
    const everyInstanceHas = (matches: (sample: Sample) => boolean) =>
      instances.every((instance) =>
        count(instance, (s) => s.kind !== "B call" && matches(s)) >= ENOUGH && count(instance, (s) => s.kind === "B call") > 0
      )
    let stopped = false
    const loop = async (instance: Instance, kind: Sample["kind"]) => {
      while (!stopped) {
        const answer = kind === "A call"
          ? await callService(instance, a)
          : kind === "A token"
          ? await requestToken(instance, a)
          : await callService(instance, b)
        samples.push({ kind, answer })
      }
    }
    // On every instance: 8 loops calling with A's token, one asking tokens for A, one calling with B's.
    const loops = instances.flatMap((instance) => [
      ...Array.from({ length: 8 }, () => loop(instance, "A call")),
      loop(instance, "A token"),
      loop(instance, "B call")
    ])
    // The deletion is sent once every instance has answered enough of A's requests, and the loops
    // stop once every instance has answered enough that were sent after its acknowledgement.
    const startedAt = performance.now()
    await pollUntil(
      "requests before the deletion",
      SIDE_WITHIN_MS,
      async () => everyInstanceHas((s) => s.answer.end > startedAt) ? undefined : `${samples.length} requests so far`
    )
    const sentAt = performance.now()
    const ack = await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${a.client_id}`)
    const ackAt = ack.end
    try {
      await pollUntil(
        "requests after the acknowledgement",
        SIDE_WITHIN_MS,
        async () => everyInstanceHas((s) => s.answer.start > ackAt) ? undefined : `${samples.length} requests so far`
      )
    } finally {
      stopped = true
      await Promise.all(loops)
    }
    expect(ack.status, describeAnswer(ack)).toBe(204)

    const ofA = samples.filter((s) => s.kind !== "B call")
    const after = ofA.filter((s) => s.answer.start > ackAt)
    const before = ofA.filter((s) => s.answer.end < sentAt)
    const show = (list: Array<Sample>) => list.slice(0, 10).map((s) => describeAnswer(s.answer))
    // The invariant: nothing sent after the acknowledgement is accepted, anywhere...
    expect(show(after.filter((s) => s.answer.status === 200)), "accepted after the acknowledgement").toEqual([])
    // ...and it is refused as a deleted credential (not by an overloaded server).
    expect(show(after.filter((s) => s.answer.status !== 401)), "not 401 after the acknowledgement").toEqual([])
    // What finished before the deletion was sent was accepted: the race had two sides.
    expect(show(before.filter((s) => s.answer.status !== 200)), "refused before the deletion").toEqual([])
    // B, on the same service, never noticed.
    const bystander = samples.filter((s) => s.kind === "B call")
    expect(show(bystander.filter((s) => s.answer.status !== 200)), "B refused").toEqual([])
    for (const instance of instances) {
      const mine = (list: Array<Sample>) => list.filter((s) => s.answer.label.startsWith(`${instance.name}:`)).length
      expect(mine(after), `requests to ${instance.name} after the acknowledgement`).toBeGreaterThanOrEqual(ENOUGH)
      expect(mine(before), `requests to ${instance.name} before the deletion`).toBeGreaterThanOrEqual(ENOUGH)
      expect(mine(bystander), `B's requests to ${instance.name}`).toBeGreaterThan(0)
    }
    console.log(
      `racing deletion: ${samples.length} requests, ${before.length} of A's before it was sent, ` +
        `${after.length} after its acknowledgement (${Math.round(ackAt - sentAt)} ms)`
    )
  }, 60_000)
})
