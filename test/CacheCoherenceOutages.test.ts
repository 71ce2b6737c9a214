/**
 * Coherence across instances (docs/contract.md §2: "A deletion acknowledged by any instance makes
 * every instance refuse that credential's tokens from the next request on"), black-box over HTTP, so
 * that it holds whatever an instance keeps in memory.
 * Here under the conditions a per-instance cache gets wrong: a frozen instance (SIGSTOP), every
 * database connection killed, a database outage in front of one instance, both at once. A deletion
 * may wait out an unreachable instance's lease (about 2 s) but never much longer; the instance never
 * accepts the deleted credential, and serves the others again once it is back.
 *
 * Three real `npm start` processes on one PostgreSQL database of their own, and a fourth behind a
 * TCP proxy (test/support/CoherenceCluster.ts). Needs TEST_DATABASE_URL (always set by .ci/run).
 * No assertion depends on how fast the machine is: acknowledgements are held to the protocol's bound
 * (the lease, plus a wide margin) and their latencies are printed, not compared.
 */
import { performance } from "node:perf_hooks"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { coherenceCluster, tcpClientPorts, unreadConnections } from "./support/CoherenceCluster.js"
import {
  ACK_WITHIN_MS,
  RECOVERY_MS,
  DATABASE_URL,
  sleep,
  describeAnswer,
  admin,
  adminPath,
  requestToken,
  callService,
  liveProblem,
  expectLive,
  warmAll,
  warmSteadily,
  REFUSED,
  callOutcome,
  expectRefused,
  expectNotAcceptedDuringOutage,
  pollUntil,
  type Instance,
  type Answer
} from "./support/CoherenceRequests.js"

describe.skipIf(DATABASE_URL === undefined)("cache coherence: deletions while an instance is frozen or cut off", () => {
  const { cluster, buildPair } = coherenceCluster()

  // ---------------------------------------------------------------------------------------------
  // A frozen instance.

  it("an instance frozen (SIGSTOP): acknowledged within the lease; its first request after SIGCONT refuses", async () => {
    const { instances } = cluster
    const [deleter, other, frozen] = instances as [Instance, Instance, Instance]
    const { service, a, b } = await buildPair(deleter)
    await warmSteadily(instances, [a, b])

    const pid = frozen.server.serverPid()
    process.kill(pid, "SIGSTOP")
    let ack: Answer
    try {
      ack = await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${a.client_id}`)
      // The running instances refuse at once, frozen peer or not.
      await expectRefused(deleter, a, "revoked")
      await expectRefused(other, a, "revoked")
    } finally {
      process.kill(pid, "SIGCONT")
    }
    expect(ack.status, describeAnswer(ack)).toBe(204)
    console.log(`deletion acknowledged in ${Math.round(ack.end - ack.start)} ms with ${frozen.name} frozen`)
    expect(ack.end - ack.start, `acknowledged while ${frozen.name} was frozen: ${describeAnswer(ack)}`).toBeLessThan(
      ACK_WITHIN_MS
    )

    // Whatever it held before it was frozen, its first request refuses.
    const first = await callService(frozen, a)
    expect(callOutcome(first), describeAnswer(first)).toEqual(REFUSED.revoked.call)
    const issued = await requestToken(frozen, a)
    expect({ status: issued.status, error: issued.body?.error }, describeAnswer(issued)).toEqual(REFUSED.revoked.token)
    // And it serves again: B works on it, and still everywhere else.
    await pollUntil(`B on ${frozen.name} after SIGCONT`, RECOVERY_MS, () => liveProblem(frozen, b))
    for (const instance of instances) await expectLive(instance, b)
  }, 60_000)

  // ---------------------------------------------------------------------------------------------
  // Every database connection killed just before a deletion.

  it("every database connection killed just before a deletion: acknowledged, refused everywhere, recovers", async () => {
    const { instances } = cluster
    const deleter = instances[1]!
    const { service, a, b } = await buildPair(deleter)
    await warmAll(instances, [a, b])

    const databasePort = Number(new URL(DATABASE_URL!).port || "5432")
    const ports = instances.map((instance) => tcpClientPorts(instance.server.serverPid(), databasePort))
    // Else nothing would be killed and the test would prove nothing.
    ports.forEach((held, i) => expect(held.length, `${instances[i]!.name} holds no database connection`).toBeGreaterThan(0))

    const client = new pg.Client({ connectionString: DATABASE_URL! })
    await client.connect()
    let killed: Array<Record<string, unknown>>
    try {
      // PostgreSQL's side of exactly these connections (pg_stat_activity.client_port): filtering on
      // `application_name = 'service-auth'` would also kill the servers of other test files.
      ;({ rows: killed } = await client.query(
        `SELECT pid, client_port, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
         WHERE client_port = ANY($1::int[]) AND client_addr IN ('127.0.0.1', '::1') AND pid <> pg_backend_pid()`,
        [ports.flat()]
      ))
    } finally {
      await client.end()
    }
    for (const [i, held] of ports.entries()) {
      const ofInstance = killed.filter((row) => held.includes(Number(row.client_port)))
      expect(ofInstance.length, `no backend of ${instances[i]!.name} was terminated`).toBeGreaterThan(0)
      expect(ofInstance.every((row) => row.terminated === true)).toBe(true)
    }

    // The deletion right after: 503 is allowed while the instance reconnects, never a false success.
    const started = performance.now()
    const attempts: Array<Answer> = []
    for (;;) {
      const attempt = await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${a.client_id}`)
      attempts.push(attempt)
      if (attempt.status !== 503 && attempt.status !== 0) break
      if (performance.now() - started > RECOVERY_MS) break
      await sleep(100)
    }
    const ack = attempts.at(-1)!
    const log = attempts.map(describeAnswer).join("\n")
    // A 404 is an acknowledgement only after a 503 whose deletion had in fact been committed.
    if (ack.status === 404) expect(attempts.length, log).toBeGreaterThan(1)
    else expect(ack.status, log).toBe(204) // a lost connection is a 503 to retry, never a 500

    // Every instance refuses (503 while it reconnects is refusing too)...
    await Promise.all(instances.map(async (instance) => {
      expectNotAcceptedDuringOutage(await callService(instance, a))
      expectNotAcceptedDuringOutage(await requestToken(instance, a))
    }))
    // ...B works again on every instance within a few seconds, A never does,
    await Promise.all(
      instances.map((instance) =>
        pollUntil(`B on ${instance.name} after the connections were killed`, RECOVERY_MS, async () => {
          expectNotAcceptedDuringOutage(await callService(instance, a))
          return liveProblem(instance, b)
        })
      )
    )
    // ...and, recovered, A gets exactly the refusals of a deleted credential.
    for (const instance of instances) await expectRefused(instance, a, "revoked")
  }, 60_000)

  // ---------------------------------------------------------------------------------------------
  // A database outage in front of one instance.

  const outageRound = async (mode: "stall" | "cut", deleter: Instance, remove: "DELETE" | "save") => {
    const { instances, cutOff, proxy } = cluster
    const { profile, service, a, b } = await buildPair(deleter)
    const everyone = [...instances, cutOff]
    await warmSteadily(everyone, [a, b])

    if (mode === "stall") proxy.stall()
    else proxy.cut()
    const ack = remove === "DELETE"
      ? await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${a.client_id}`)
      : await admin(deleter, "POST", `/admin/profiles/${profile}/save`, {
        changes: [{ op: "remove_credential", environment: "prod", service_uuid: service.uuid, client_id: a.client_id }]
      })
    expect(ack.status, describeAnswer(ack)).toBe(remove === "DELETE" ? 204 : 200)
    console.log(`deletion acknowledged in ${Math.round(ack.end - ack.start)} ms with ${cutOff.name}'s database ${mode}`)
    expect(ack.end - ack.start, `acknowledged while ${cutOff.name} had no database: ${describeAnswer(ack)}`)
      .toBeLessThan(ACK_WITHIN_MS)
    for (const instance of instances) await expectRefused(instance, a, "revoked")

    // The instance without its database never accepts A, for as long as the outage lasts...
    const outageStart = performance.now()
    let probes = 0
    do {
      const [called, issued] = await Promise.all([callService(cutOff, a), requestToken(cutOff, a)])
      expectNotAcceptedDuringOutage(called)
      expectNotAcceptedDuringOutage(issued)
      probes++
    } while (performance.now() - outageStart < 2_500)
    expect(probes).toBeGreaterThan(0)

    // ...nor while it recovers; B works on it again within RECOVERY_MS,
    proxy.restore()
    await pollUntil(`B on ${cutOff.name} after the ${mode}`, RECOVERY_MS, async () => {
      expectNotAcceptedDuringOutage(await callService(cutOff, a))
      expectNotAcceptedDuringOutage(await requestToken(cutOff, a))
      return liveProblem(cutOff, b)
    })
    // and then A gets exactly the refusals of a deleted credential there, B works everywhere.
    await expectRefused(cutOff, a, "revoked")
    for (const instance of everyone) await expectLive(instance, b)
  }

  it("one instance's database black-holed (stall): acknowledged within the lease; never accepted there", async () => {
    const { instances } = cluster
    await outageRound("stall", instances[0]!, "DELETE")
  }, 60_000)

  it("one instance's database stopped (cut): acknowledged within the lease; never accepted there", async () => {
    const { instances } = cluster
    await outageRound("cut", instances[1]!, "save")
  }, 60_000)

  // Frozen and cut off at once: no announcement can reach it, and no timer of its own has fired
  // when it resumes, so only the clock can tell it that what it holds is stale. The requests are
  // sent (after the acknowledgement) while it is frozen: the first thing it reads when it resumes.
  it("frozen with its database black-holed: the requests waiting when it resumes are not accepted", async () => {
    const { instances, cutOff, proxy } = cluster
    const deleter = instances[0]!
    const { service, a, b } = await buildPair(deleter)
    const everyone = [...instances, cutOff]
    await warmSteadily(everyone, [a, b])

    const pid = cutOff.server.serverPid()
    process.kill(pid, "SIGSTOP")
    let ack: Answer
    let waiting: Array<Promise<Answer>>
    try {
      proxy.stall()
      ack = await admin(deleter, "DELETE", `${adminPath(service)}/credentials/${a.client_id}`)
      waiting = [callService(cutOff, a), requestToken(cutOff, a)]
      // The requests must be in its sockets before it runs again: the first thing it reads.
      await pollUntil(
        `the requests queued at ${cutOff.name}`,
        RECOVERY_MS,
        async () => unreadConnections(cutOff.server.port) >= waiting.length ? undefined : "not yet"
      )
    } finally {
      process.kill(pid, "SIGCONT")
    }
    expect(ack.status, describeAnswer(ack)).toBe(204)
    console.log(`deletion acknowledged in ${Math.round(ack.end - ack.start)} ms with ${cutOff.name} frozen and stalled`)
    expect(ack.end - ack.start, describeAnswer(ack)).toBeLessThan(ACK_WITHIN_MS)
    for (const answer of await Promise.all(waiting)) expectNotAcceptedDuringOutage(answer)

    proxy.restore()
    await pollUntil(`B on ${cutOff.name} after the freeze and stall`, RECOVERY_MS, async () => {
      expectNotAcceptedDuringOutage(await callService(cutOff, a))
      return liveProblem(cutOff, b)
    })
    await expectRefused(cutOff, a, "revoked")
  }, 60_000)
})
