/**
 * The database outage run's harness: the real server (`npm start`) on a database of its own,
 * reached through a TCP proxy that the tests cut (connections reset) or stall (a black hole) and
 * restore; before the outages, a service with credentials A (deleted, the deletion acknowledged) and
 * B, a token each; and the timed requests and expectations every round uses. Called inside a
 * `describe`: it registers that block's hooks.
 */
import { randomBytes } from "node:crypto"
import { afterAll, afterEach, beforeAll, expect } from "vitest"
import { freshDatabase } from "./Databases.js"
import { type ServerProcess, startServer } from "./ServerProcess.js"
import { startTcpProxy, type TcpProxy } from "./TcpProxy.js"

export const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

/**
 * The longest any request may take while the database is away: the server's bound (1.5 s, the
 * operators' guide), plus a wide margin for a busy machine. A request that hangs takes far longer.
 */
export const OUTAGE_ANSWER_MS = 1_500 + 2_500
/** Where a request is given up on as hung: well past OUTAGE_ANSWER_MS. */
export const HUNG_MS = 10_000
/**
 * Live credentials are answered from the instance's cache (docs/cache-coherence.md) until it
 * notices the outage: at once when the connections are reset (the listening connection is reset
 * too), within the renewal period plus its patience (0.8 s) when the database stops answering.
 * Deleted credentials are refused throughout. The test waits until B's calls are refused, for up
 * to this long, rather than for a fixed time.
 */
export const NOTICED_WITHIN_MS = 10_000

/** How long recovery may take once the database is back (polled). */
export const RECOVERY_MS = 20_000

export interface Answer {
  readonly status: number
  readonly headers: Headers | undefined
  readonly body: any
  readonly text: string
  readonly elapsed: number
  readonly label: string
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const databaseOutageRun = () => {
  let proxy: TcpProxy
  let server: ServerProcess
  let database: Awaited<ReturnType<typeof freshDatabase>> | undefined

  const profile = `outage-${randomBytes(6).toString("hex")}`
  const environment = "prod"
  let uuid: string
  let servicePath: string
  let callPath: string
  let credentialA: { client_id: string; client_secret: string }
  let credentialB: { client_id: string; client_secret: string }
  let tokenA: string
  let tokenB: string

  /** Any request, timed; a request that does not answer within HUNG_MS is status 0 (never throws). */
  const call = async (
    label: string,
    method: string,
    path: string,
    options: { readonly headers?: Record<string, string>; readonly body?: string } = {}
  ): Promise<Answer> => {
    const start = Date.now()
    try {
      const response = await fetch(`${server.base}${path}`, {
        method,
        headers: options.headers ?? {},
        ...(options.body === undefined ? {} : { body: options.body }),
        signal: AbortSignal.timeout(HUNG_MS)
      })
      const text = await response.text()
      let body: unknown = undefined
      try {
        body = text === "" ? undefined : JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, headers: response.headers, body, text, elapsed: Date.now() - start, label }
    } catch (error) {
      return { status: 0, headers: undefined, body: undefined, text: String(error), elapsed: Date.now() - start, label }
    }
  }

  const adminCall = (label: string, method: string, path: string, body?: unknown) =>
    call(label, method, path, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  const tokenFields = (credential: { client_id: string; client_secret: string }) =>
    new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile,
      environment,
      service_uuid: uuid
    }).toString()

  const requestToken = (label: string, credential: { client_id: string; client_secret: string }) =>
    call(label, "POST", "/oauth/token", {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: tokenFields(credential)
    })

  const callService = (label: string, token: string, body: unknown = { ping: label }) =>
    call(label, "POST", callPath, {
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  const describeAnswer = (answer: Answer) => `${answer.label}: ${answer.status} after ${answer.elapsed} ms: ${answer.text}`

  /** 503 temporarily_unavailable, within the limit. */
  const expectUnavailable = (answer: Answer) => {
    // Soft, so that one run reports every slow answer of a round, not only the first.
    expect.soft(
      { status: answer.status, error: answer.body?.error, fast: answer.elapsed <= OUTAGE_ANSWER_MS },
      describeAnswer(answer)
    ).toEqual({ status: 503, error: "temporarily_unavailable", fast: true })
    expect.soft(typeof answer.body?.error_description, describeAnswer(answer)).toBe("string")
    expect.soft(Object.keys(answer.body ?? {}).sort(), describeAnswer(answer)).toEqual(["error", "error_description"])
  }

  /** The deleted credential's token: refused (503 or 401, fail closed), never accepted, within the limit. */
  const expectRefusedWhileDown = (answer: Answer) => {
    expect(answer.status, `${describeAnswer(answer)}: the deleted credential's token was accepted`).not.toBe(200)
    expect.soft(answer.elapsed, describeAnswer(answer)).toBeLessThanOrEqual(OUTAGE_ANSWER_MS)
    expect.soft([401, 503], describeAnswer(answer)).toContain(answer.status)
    expect.soft(answer.body?.error, describeAnswer(answer)).toBe(
      answer.status === 503 ? "temporarily_unavailable" : "invalid_token"
    )
  }

  /** Every kind of request, one after the other, while the database is away. */
  const expectEverythingUnavailable = async (round: string) => {
    const token = await requestToken(`${round} POST /oauth/token (B)`, credentialB)
    expectUnavailable(token)
    expect(token.headers?.get("cache-control")).toBe("no-store")
    expect(token.headers?.get("pragma")).toBe("no-cache")

    expectUnavailable(await callService(`${round} service call with B's token`, tokenB))
    expectRefusedWhileDown(await callService(`${round} service call with A's (deleted) token`, tokenA))
    expectUnavailable(await adminCall(`${round} GET profile`, "GET", `/admin/profiles/${profile}`))
    expectUnavailable(await adminCall(`${round} GET credentials`, "GET", `${servicePath}/credentials`))
    expectUnavailable(await adminCall(`${round} POST credential`, "POST", `${servicePath}/credentials`, {}))
    // A deletion asked for during the outage is not acknowledged (and so not "forgotten" either).
    expectUnavailable(
      await adminCall(`${round} DELETE credential B`, "DELETE", `${servicePath}/credentials/${credentialB.client_id}`)
    )

    const ready = await call(`${round} GET /readyz`, "GET", "/readyz")
    expect.soft({ status: ready.status, fast: ready.elapsed <= OUTAGE_ANSWER_MS }, describeAnswer(ready)).toEqual({
      status: 503,
      fast: true
    })
    // The process itself is up.
    const health = await call(`${round} GET /healthz`, "GET", "/healthz")
    expect(health.status, describeAnswer(health)).toBe(200)
  }

  /** Many requests at once (more than the pool's 10 connections): every one answers within the limit. */
  const expectBurstUnavailable = async (round: string) => {
    const answers = await Promise.all([
      ...Array.from({ length: 8 }, (_, i) => requestToken(`${round} burst token ${i}`, credentialB)),
      ...Array.from({ length: 8 }, (_, i) => callService(`${round} burst call B ${i}`, tokenB)),
      ...Array.from({ length: 4 }, (_, i) => callService(`${round} burst call A ${i}`, tokenA)),
      ...Array.from({ length: 4 }, (_, i) => adminCall(`${round} burst admin ${i}`, "GET", `/admin/profiles/${profile}`))
    ])
    for (const answer of answers) {
      if (answer.label.includes("call A")) expectRefusedWhileDown(answer)
      else expectUnavailable(answer)
    }
  }

  /** Polls /readyz until 200; returns how long recovery took. */
  const awaitRecovery = async (round: string) => {
    const start = Date.now()
    let last: Answer | undefined
    while (Date.now() - start < RECOVERY_MS) {
      last = await call(`${round} GET /readyz`, "GET", "/readyz")
      if (last.status === 200) return Date.now() - start
      await sleep(100)
    }
    throw new Error(`/readyz did not recover within ${RECOVERY_MS} ms; last answer ${last && describeAnswer(last)}`)
  }

  /**
   * Polls B's service call until it is refused (the server noticed the outage and no longer answers
   * from its cache); A's token is never accepted meanwhile.
   */
  const untilNoticed = async (round: string) => {
    const start = Date.now()
    let last: Answer | undefined
    while (Date.now() - start < NOTICED_WITHIN_MS) {
      expectRefusedWhileDown(await callService(`${round} A, until noticed`, tokenA))
      last = await callService(`${round} B, until noticed`, tokenB)
      if (last.status !== 200) return
      await sleep(50)
    }
    throw new Error(`the outage was not noticed within ${NOTICED_WITHIN_MS} ms; last answer ${last && describeAnswer(last)}`)
  }

  /** After recovery: everything works, nothing acknowledged is lost, the deleted credential stays deleted. */
  const expectEverythingBack = async (round: string) => {
    expect(server.child.exitCode, "the server was not restarted").toBeNull()

    const token = await requestToken(`${round} POST /oauth/token (B)`, credentialB)
    expect(token.status, describeAnswer(token)).toBe(200)
    const fresh = token.body.access_token as string

    for (const [label, bearer] of [["B's old token", tokenB], ["B's new token", fresh]] as const) {
      const answer = await callService(`${round} service call with ${label}`, bearer, { round })
      expect({ status: answer.status, body: answer.body }, describeAnswer(answer)).toEqual({
        status: 200,
        body: {
          service_uuid: uuid,
          profile,
          environment,
          client_id: credentialB.client_id,
          body: { round }
        }
      })
    }

    // A's deletion was acknowledged before the outage: still refused, and A cannot get a new token.
    const revoked = await callService(`${round} service call with A's token`, tokenA)
    expect({ status: revoked.status, error: revoked.body?.error }, describeAnswer(revoked)).toEqual({
      status: 401,
      error: "invalid_token"
    })
    const tokenForA = await requestToken(`${round} POST /oauth/token (A)`, credentialA)
    expect({ status: tokenForA.status, error: tokenForA.body?.error }, describeAnswer(tokenForA)).toEqual({
      status: 401,
      error: "invalid_client"
    })

    // Nothing lost: the profile, its environment, the service and B's credential (and only B's).
    const document = await adminCall(`${round} GET profile`, "GET", `/admin/profiles/${profile}`)
    expect(document.status, describeAnswer(document)).toBe(200)
    expect(document.body.profile).toBe(profile)
    expect(document.body.environments).toHaveLength(1)
    expect(document.body.environments[0].name).toBe(environment)
    expect(document.body.environments[0].services).toHaveLength(1)
    const service = document.body.environments[0].services[0]
    expect(service.uuid).toBe(uuid)
    expect(service.auth_type).toBe("oauth")
    expect(service.credentials.map((c: { client_id: string }) => c.client_id)).toEqual([credentialB.client_id])

    const listed = await adminCall(`${round} GET credentials`, "GET", `${servicePath}/credentials`)
    expect(listed.status, describeAnswer(listed)).toBe(200)
    expect(listed.body.credentials.map((c: { client_id: string }) => c.client_id)).toEqual([credentialB.client_id])

    // Writes work again: add a credential, then remove it (acknowledged, so its token dies at once).
    const added = await adminCall(`${round} POST credential`, "POST", `${servicePath}/credentials`, {})
    expect(added.status, describeAnswer(added)).toBe(201)
    const addedToken = await requestToken(`${round} token for the added credential`, added.body)
    expect(addedToken.status, describeAnswer(addedToken)).toBe(200)
    const removed = await adminCall(
      `${round} DELETE added credential`,
      "DELETE",
      `${servicePath}/credentials/${added.body.client_id}`
    )
    expect(removed.status, describeAnswer(removed)).toBe(204)
    const dead = await callService(`${round} call with the removed credential's token`, addedToken.body.access_token)
    expect(dead.status, describeAnswer(dead)).toBe(401)
  }

  beforeAll(async () => {
    database = await freshDatabase()
    const target = new URL(database.url)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port === "" ? "5432" : target.port) })
    const proxied = new URL(database.url)
    proxied.hostname = "127.0.0.1"
    proxied.port = String(proxy.port)
    server = await startServer({ DATABASE_URL: proxied.toString(), ADMIN_TOKEN })

    // Before the outage: a profile, an environment, an oauth service, credentials A and B, a token each.
    expect((await adminCall("setup", "PUT", `/admin/profiles/${profile}`, {})).status).toBe(201)
    expect((await adminCall("setup", "PUT", `/admin/profiles/${profile}/environments/${environment}`, {})).status).toBe(201)
    const service = await adminCall("setup", "POST", `/admin/profiles/${profile}/environments/${environment}/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    expect(service.status).toBe(201)
    uuid = service.body.uuid
    servicePath = `/admin/profiles/${profile}/environments/${environment}/services/${uuid}`
    callPath = `/service/${profile}/${environment}/json/${uuid}`
    const a = await adminCall("setup", "POST", `${servicePath}/credentials`, {})
    const b = await adminCall("setup", "POST", `${servicePath}/credentials`, {})
    expect([a.status, b.status]).toEqual([201, 201])
    credentialA = a.body
    credentialB = b.body
    const [ta, tb] = [await requestToken("setup A", credentialA), await requestToken("setup B", credentialB)]
    expect([ta.status, tb.status]).toEqual([200, 200])
    tokenA = ta.body.access_token
    tokenB = tb.body.access_token
    expect((await callService("setup A", tokenA)).status).toBe(200)
    expect((await callService("setup B", tokenB)).status).toBe(200)

    // A is deleted, and the deletion acknowledged, before the database goes away.
    const deleted = await adminCall("setup", "DELETE", `${servicePath}/credentials/${credentialA.client_id}`)
    expect(deleted.status).toBe(204)
    expect((await callService("setup A after deletion", tokenA)).status).toBe(401)
    expect((await call("setup readyz", "GET", "/readyz")).status).toBe(200)
  }, 90_000)

  afterEach(() => {
    // Whatever happened, the next test starts with the database reachable.
    proxy?.restore()
  })

  afterAll(async () => {
    try {
      if (server !== undefined) {
        const code = await server.stop(10_000)
        if (code !== 0) console.error(`server exited with ${code}:\n${server.log()}`)
      }
    } finally {
      await proxy?.close()
      await database?.drop()
    }
  }, 60_000)

  return {
    profile,
    get proxy() {
      return proxy
    },
    get server() {
      return server
    },
    get servicePath() {
      return servicePath
    },
    get credentialB() {
      return credentialB
    },
    get tokenA() {
      return tokenA
    },
    get tokenB() {
      return tokenB
    },
    call,
    adminCall,
    requestToken,
    callService,
    describeAnswer,
    expectUnavailable,
    expectRefusedWhileDown,
    expectEverythingUnavailable,
    expectBurstUnavailable,
    awaitRecovery,
    untilNoticed,
    expectEverythingBack
  }
}
