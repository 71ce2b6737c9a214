/**
 * Database outage: when PostgreSQL goes away, the token endpoint, service calls
 * and the admin API answer `503 {"error":"temporarily_unavailable", ...}` within 1.5 seconds,
 * `/readyz` answers 503, and everything recovers without a restart once the database is back.
 * Nothing acknowledged before the outage is lost, and a token whose credential was deleted is never
 * accepted again (fail closed).
 *
 * The real server (`npm start`) talks to the shared PostgreSQL through a TCP proxy of its own
 * (`support/TcpProxy.ts`), which the test cuts (PostgreSQL stopped: connections reset) or stalls
 * (a black hole: nothing answers) and restores. The shared database itself is never touched: the
 * server gets a database of its own, so that the lease it stops renewing during an outage never
 * makes the writes of other test files' servers wait.
 */
import { describe, expect, it } from "vitest"
import { type Answer, DATABASE_URL, databaseOutageRun, HUNG_MS, OUTAGE_ANSWER_MS, sleep } from "./support/DatabaseOutageRun.js"

describe.skipIf(DATABASE_URL === undefined)("database outage behind a TCP proxy (real server, PostgreSQL)", () => {
  const run = databaseOutageRun()
  const {
    adminCall,
    awaitRecovery,
    call,
    callService,
    describeAnswer,
    expectBurstUnavailable,
    expectEverythingBack,
    expectEverythingUnavailable,
    expectRefusedWhileDown,
    expectUnavailable,
    profile,
    requestToken,
    untilNoticed
  } = run

  it("PostgreSQL stopped (connections reset): every endpoint answers 503 within 1.5 s; recovers without a restart", async () => {
    run.proxy.cut()
    await untilNoticed("cut")
    // The first requests after the cut find dead connections in the pool; the later ones none.
    await expectEverythingUnavailable("cut #1")
    await expectBurstUnavailable("cut burst")
    await sleep(1_000)
    await expectEverythingUnavailable("cut #2")

    run.proxy.restore()
    console.log(`recovered ${await awaitRecovery("after cut")} ms after the cut ended`)
    await expectEverythingBack("after cut")
  }, 60_000)

  /** Fills the pool with idle connections, so the black hole swallows connections the server believes alive. */
  const warmPool = async () => {
    const answers = await Promise.all([
      ...Array.from({ length: 5 }, (_, i) => callService(`warm call ${i}`, run.tokenB)),
      ...Array.from({ length: 5 }, (_, i) => adminCall(`warm admin ${i}`, "GET", `/admin/profiles/${profile}`))
    ])
    for (const answer of answers) expect(answer.status, describeAnswer(answer)).toBe(200)
  }

  // With the database black-holed, requests on the pool's existing connections must still be
  // answered within 2 s. The interrupted statement's cleanup (@effect/sql-pg's pg_cancel_backend,
  // a transaction's uninterruptible ROLLBACK) is itself sent into the black hole and can take many
  // seconds; `refineSqlError` answers 503 without waiting for it (Effect.disconnect).
  it("PostgreSQL unreachable (black hole): every endpoint answers 503 within 1.5 s", async () => {
    await warmPool()
    run.proxy.stall()
    // Until the silence is noticed, B's token may still be answered from the cache, A's never.
    const early = await Promise.all([callService("stall early call B", run.tokenB), callService("stall early call A", run.tokenA)])
    expect.soft([200, 503], describeAnswer(early[0])).toContain(early[0].status)
    expectRefusedWhileDown(early[1])
    await untilNoticed("stall")
    const timeoutMs = HUNG_MS
    const requests: Array<[string, Promise<Answer>]> = [
      ["stall POST /oauth/token (B)", requestToken("stall POST /oauth/token (B)", run.credentialB)],
      ["stall service call with B's token", callService("stall service call with B's token", run.tokenB)],
      ["stall service call with A's (deleted) token", callService("stall service call with A's (deleted) token", run.tokenA)],
      ["stall GET profile", adminCall("stall GET profile", "GET", `/admin/profiles/${profile}`)],
      ["stall POST credential", adminCall("stall POST credential", "POST", `${run.servicePath}/credentials`, {})],
      ["stall GET /readyz", call("stall GET /readyz", "GET", "/readyz")]
    ]
    const answers = await Promise.all(requests.map(([label, pending]) =>
      Promise.race([
        pending,
        sleep(timeoutMs).then((): Answer => ({
          status: 0,
          headers: undefined,
          body: undefined,
          text: `no answer within ${timeoutMs} ms`,
          elapsed: timeoutMs,
          label
        }))
      ])
    ))
    // Only status and timing here (`.fails` would hide any other failure); "never accepted while
    // the database is away" is checked by the next test.
    for (const answer of answers) {
      if (answer.label.includes("A's")) {
        expect.soft({ status: answer.status, fast: answer.elapsed <= OUTAGE_ANSWER_MS }, describeAnswer(answer)).toEqual({
          status: 503,
          fast: true
        })
      } else if (answer.label.includes("readyz")) {
        expect.soft({ status: answer.status, fast: answer.elapsed <= OUTAGE_ANSWER_MS }, describeAnswer(answer)).toEqual({
          status: 503,
          fast: true
        })
      } else expectUnavailable(answer)
    }
  }, 60_000)

  it("PostgreSQL unreachable (black hole): nothing is accepted that should not be, and all recovers without a restart", async () => {
    await warmPool()
    run.proxy.stall()
    // Requests while the database is black-holed (some of them hang: see the previous test). The
    // database comes back after 3 s at the earliest, and only once the requests that must be refused
    // have been answered (else they could succeed); the connections they hang on are dead by then.
    const during = [
      callService("stall call A", run.tokenA),
      callService("stall call A (2)", run.tokenA),
      adminCall("stall DELETE credential B", "DELETE", `${run.servicePath}/credentials/${run.credentialB.client_id}`),
      // Asked once the silence is noticed: before, the cache could still answer it.
      untilNoticed("stall").then(() => requestToken("stall token (B)", run.credentialB)),
      call("stall readyz", "GET", "/readyz")
    ]
    await Promise.all([sleep(3_000), ...during.slice(2)])
    run.proxy.restore()
    const [a1, a2, deleteB, tokenDuring, readyDuring] = await Promise.all(during)
    // The deleted credential's token is never accepted; the deletion asked for while the database
    // was away was not acknowledged (B is still there below); no success and no hang past the outage.
    for (const answer of [a1!, a2!]) {
      expect(answer.status, `${describeAnswer(answer)}: the deleted credential's token was accepted`).not.toBe(200)
      expect([401, 503], describeAnswer(answer)).toContain(answer.status)
    }
    expect(deleteB!.status, describeAnswer(deleteB!)).toBe(503)
    expect(tokenDuring!.status, describeAnswer(tokenDuring!)).toBe(503)
    expect(readyDuring!.status, describeAnswer(readyDuring!)).toBe(503)

    console.log(`recovered ${await awaitRecovery("after stall")} ms after the stall ended`)
    await expectEverythingBack("after stall")
  }, 60_000)

  it("repeated short outages: A's token is never accepted, B's works whenever the database is up", async () => {
    for (let cycle = 0; cycle < 3; cycle++) {
      run.proxy.cut()
      expectRefusedWhileDown(await callService(`cycle ${cycle} A down`, run.tokenA))
      await untilNoticed(`cycle ${cycle}`)
      expectUnavailable(await callService(`cycle ${cycle} B down`, run.tokenB))
      run.proxy.restore()
      await awaitRecovery(`cycle ${cycle}`)
      const a = await callService(`cycle ${cycle} A up`, run.tokenA)
      expect(a.status, describeAnswer(a)).toBe(401)
      const b = await callService(`cycle ${cycle} B up`, run.tokenB)
      expect(b.status, describeAnswer(b)).toBe(200)
    }
  }, 60_000)

  it("after the outages the server still shuts down cleanly on SIGTERM: exit code 0", async () => {
    // SIGTERM to npm, as a supervisor would send it; npm relays it and exits with node's code.
    const exited = new Promise<number | null>((resolve) => run.server.child.once("exit", (code) => resolve(code)))
    const signalledAt = Date.now()
    process.kill(run.server.child.pid!, "SIGTERM")
    // Nothing is in flight, so it need not wait out SHUTDOWN_GRACE_MS (10 s): a wide margin below it.
    const code = await Promise.race([exited, sleep(30_000).then(() => "did not exit within 30 s")])
    const exitedAfter = Date.now() - signalledAt
    console.log(`exited ${exitedAfter} ms after SIGTERM`)
    expect(code, run.server.log()).toBe(0)
    expect(exitedAfter).toBeLessThan(10_000)
  }, 40_000)
})
