/**
 * The failure throttles shared by two real instances on one PostgreSQL database (docs/contract.md
 * §1 and §3): an attacker's parallel guesses from one address, spread over both instances, get
 * exactly AUTH_FAILURE_LIMIT answers of 401 between them, every other one 429; then the right
 * credential from that address is refused by both. Two `npm start` processes; needs
 * TEST_DATABASE_URL (always set by .ci/run).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes, randomInt } from "node:crypto"
import { adminFetch } from "./support/AdminFetch.js"
import { basicAuthorization, type RawResponse, rawRequest } from "./support/Http.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const DATABASE_URL = process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const LIMIT = 7
const PARALLEL = 60

/** An address of 127/8 (all loopback on Linux) that no other case, run or file uses. */
const attackerAddress = () => `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`
const wrong = () => `wrong-${randomBytes(12).toString("base64url")}`

const tally = (answers: ReadonlyArray<RawResponse>) => ({
  evaluated: answers.filter((answer) => answer.status === 401).length,
  refused: answers.filter((answer) => answer.status === 429 && Number(answer.headers["retry-after"]) >= 1).length
})

describe.skipIf(DATABASE_URL === undefined)("failure throttles of two instances on one PostgreSQL database", () => {
  let servers: ReadonlyArray<ServerProcess> = []

  beforeAll(async () => {
    servers = await Promise.all(
      [0, 1].map(() => startServer({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN, AUTH_FAILURE_LIMIT: String(LIMIT) }))
    )
  }, 120_000)

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()))
  })

  /** Instance `i % 2` for the i-th attempt: the guesses alternate between the two. */
  const either = (i: number) => servers[i % 2]!

  const givenCredential = async () => {
    const [server] = servers
    const profile = `throttle-${randomBytes(6).toString("hex")}`
    expect((await adminFetch(server!.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await adminFetch(server!.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await adminFetch(server!.base, ADMIN_TOKEN, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    const servicePath = `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}`
    const credential = await adminFetch(server!.base, ADMIN_TOKEN, "POST", `${servicePath}/credentials`)
    expect(credential.status).toBe(201)
    return {
      profile,
      uuid: service.body.uuid as string,
      clientId: credential.body.client_id as string,
      secret: credential.body.client_secret as string
    }
  }

  it("wrong client secrets in parallel over both instances: exactly the limit answered 401 between them", async () => {
    const credential = await givenCredential()
    const attempt = (server: ServerProcess, from: string, secret: string, basic: boolean) =>
      rawRequest(server.port, {
        method: "POST",
        path: "/oauth/token",
        localAddress: from,
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          ...(basic ? { authorization: basicAuthorization(credential.clientId, secret) } : {})
        },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          profile: credential.profile,
          environment: "prod",
          service_uuid: credential.uuid,
          ...(basic ? {} : { client_id: credential.clientId, client_secret: secret })
        }).toString()
      })
    const attacker = attackerAddress()
    const answers = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => attempt(either(i), attacker, wrong(), i % 4 >= 2)))
    expect(tally(answers)).toEqual({ evaluated: LIMIT, refused: PARALLEL - LIMIT })
    // Both instances refuse the pair now, right secret or not; the client elsewhere gets its token.
    for (const server of servers) expect((await attempt(server, attacker, credential.secret, false)).status).toBe(429)
    for (const server of servers) expect((await attempt(server, attackerAddress(), credential.secret, false)).status).toBe(200)
  })

  it("wrong admin tokens in parallel over both instances and endpoints: exactly the limit answered 401 between them", async () => {
    const attempt = (server: ServerProcess, from: string, token: string, introspect: boolean) =>
      rawRequest(
        server.port,
        introspect
          ? {
            method: "POST",
            path: "/oauth/introspect",
            localAddress: from,
            headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
            body: "token=not-a-token"
          }
          : { method: "GET", path: "/admin/session", localAddress: from, headers: { authorization: `Bearer ${token}` } }
      )
    const attacker = attackerAddress()
    const answers = await Promise.all(Array.from({ length: PARALLEL }, (_, i) => attempt(either(i), attacker, wrong(), i % 4 >= 2)))
    expect(tally(answers)).toEqual({ evaluated: LIMIT, refused: PARALLEL - LIMIT })
    for (const answer of answers) {
      expect(JSON.parse(answer.text).error).toBe(answer.status === 401 ? "unauthorized" : "too_many_attempts")
    }
    for (const server of servers) expect((await attempt(server, attacker, ADMIN_TOKEN, false)).status).toBe(429)
    for (const server of servers) expect((await attempt(server, attackerAddress(), ADMIN_TOKEN, false)).status).toBe(200)
  })
})
