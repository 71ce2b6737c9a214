/**
 * The client address behind proxies (TRUSTED_PROXIES, docs/contract.md §5 and
 * docs/operators.md): real servers, requests from 127.0.0.1 (the load balancer, trusted) and from
 * 127.0.0.2 and another 127.x address (clients connecting directly), with forwarded addresses. On
 * PostgreSQL (TEST_DATABASE_URL) failure counts outlive a run by a minute, so the addresses that
 * fail are drawn at random.
 *
 * What the address is shows in the audit trail's `source`; what it is for shows in the throttles:
 * a forwarded client over the limit is refused while another forwarded client, the proxy itself and
 * a direct client go on, and a client connecting directly cannot pick its address by sending
 * forwarding headers of its own.
 */
import { randomBytes, randomInt } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../src/config/AppConfig.js"
import { asJsonResponse, rawRequest } from "./support/Http.js"
import { runToExit, type ServerProcess, startServer } from "./support/ServerProcess.js"
import { fixtureOf, type JsonResponse } from "../src/testing.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const WRONG_TOKEN = randomBytes(24).toString("base64url")
const LIMIT = 3
const TRUSTED = "127.0.0.1, 10.0.0.0/8, fd00::/8"
const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL
/**
 * An address of the documentation range 198.51.100.0/24 that no other test of this file used (one
 * drawn twice would arrive already refused), and that another run of this file is unlikely to use.
 */
const usedAddresses = new Set<string>()
const someAddress = (): string => {
  const address = `198.51.100.${randomInt(1, 255)}`
  if (usedAddresses.has(address)) return someAddress()
  usedAddresses.add(address)
  return address
}

const dirs: Array<string> = []
const servers: Array<ServerProcess> = []
let proxied: ServerProcess
let direct: ServerProcess

const start = async (env: Record<string, string>) => {
  const dir = mkdtempSync(join(tmpdir(), "trusted-proxies-"))
  dirs.push(dir)
  const storage = DATABASE_URL === undefined ? { DATA_DIR: join(dir, "data") } : { DATABASE_URL }
  const server = await startServer({ ADMIN_TOKEN, ...storage, AUTH_FAILURE_LIMIT: String(LIMIT), ...env }, {
    healthTimeoutMs: 150_000
  })
  servers.push(server)
  return server
}

beforeAll(async () => {
  ;[proxied, direct] = await Promise.all([start({ TRUSTED_PROXIES: TRUSTED }), start({})])
}, 180_000)

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()))
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

interface Call {
  /** The local address to connect from: 127.0.0.1 is the proxy. */
  readonly from?: string
  readonly headers?: Record<string, string | ReadonlyArray<string>>
  readonly token?: string
  readonly body?: string
}

const send = (server: ServerProcess, method: string, path: string, call: Call = {}): Promise<JsonResponse> =>
  rawRequest(server.port, {
    method,
    path,
    localAddress: call.from ?? "127.0.0.1",
    headers: {
      ...(call.token === undefined ? {} : { authorization: `Bearer ${call.token}` }),
      ...(call.body === undefined ? {} : { "content-type": "application/json" }),
      ...call.headers
    },
    ...(call.body === undefined ? {} : { body: call.body })
  }).then(asJsonResponse)

const admin = (server: ServerProcess, method: string, path: string, call: Call = {}) =>
  send(server, method, path, { token: ADMIN_TOKEN, ...call })

const fresh = (prefix: string) => `${prefix}-${randomBytes(4).toString("hex")}`

/** The audit trail's `source` of a change made with these headers from that address. */
const auditSource = async (server: ServerProcess, call: Call) => {
  const profile = fresh("source")
  expect((await admin(server, "PUT", `/admin/profiles/${profile}`, call)).status).toBe(201)
  const audit = await admin(server, "GET", `/admin/audit?profile=${profile}`)
  const events = (audit.body as { events: Array<{ action: string; source: string }> }).events
  expect(events.map((event) => event.action)).toEqual(["profile.created"])
  return events[0]!.source
}

const ADMIN_TOO_MANY = {
  error: "too_many_attempts",
  error_description: "Too many failed admin authentication attempts from this address; retry later"
}
const CLIENT_TOO_MANY = { error: "invalid_client", error_description: "Too many failed authentication attempts" }

const expectRefused = (response: JsonResponse, body: unknown) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 429, body })
  expect(Number(response.headers["retry-after"])).toBeGreaterThanOrEqual(1)
  expect(Number(response.headers["retry-after"])).toBeLessThanOrEqual(60)
}

describe("the client address from a trusted proxy", () => {
  it("is the right-most forwarded address that is not itself trusted, IPv4 and IPv6, X-Forwarded-For or Forwarded", async () => {
    const cases: ReadonlyArray<readonly [Record<string, string | ReadonlyArray<string>>, string]> = [
      [{ "x-forwarded-for": "203.0.113.5" }, "203.0.113.5"],
      // A chain of proxies (10.0.0.0/8 trusted); what the client wrote itself, left of them, is ignored.
      [{ "x-forwarded-for": "6.6.6.6, 198.51.100.20, 10.1.2.3" }, "198.51.100.20"],
      [{ "x-forwarded-for": ["6.6.6.6", "203.0.113.9"] }, "203.0.113.9"],
      // Every hop trusted: the farthest one is the client.
      [{ "x-forwarded-for": "10.0.0.7, 10.1.2.3" }, "10.0.0.7"],
      [{ "x-forwarded-for": "2001:db8::7" }, "2001:db8::7"],
      [{ "x-forwarded-for": "6.6.6.6,2001:db8::9,fd00::1" }, "2001:db8::9"],
      [{ "x-forwarded-for": "[2001:db8::a]:4711" }, "2001:db8::a"],
      [{ forwarded: "for=192.0.2.60;proto=http;by=203.0.113.43" }, "192.0.2.60"],
      [{ forwarded: "for=6.6.6.6, for=\"[2001:db8::8]:4711\";proto=https, For=10.1.2.3" }, "2001:db8::8"],
      // A client's unbalanced quote does not swallow the element the proxy appended after it.
      [{ forwarded: ["for=\"6.6.6.6", "for=203.0.113.77"] }, "203.0.113.77"],
      // Not an address (RFC 7239's `unknown`, garbage): the trusted hop that reported it.
      [{ "x-forwarded-for": "unknown" }, "127.0.0.1"],
      [{ "x-forwarded-for": "6.6.6.6, not-an-address, 10.1.2.3" }, "10.1.2.3"],
      [{}, "127.0.0.1"]
    ]
    for (const [headers, expected] of cases) {
      expect(await auditSource(proxied, { headers }), JSON.stringify(headers)).toBe(expected)
    }
  })

  it("is the TCP peer when the peer is not trusted: a client's own X-Forwarded-For or Forwarded is ignored", async () => {
    expect(await auditSource(proxied, { from: "127.0.0.2", headers: { "x-forwarded-for": "203.0.113.5" } })).toBe("127.0.0.2")
    expect(await auditSource(proxied, { from: "127.0.0.2", headers: { forwarded: "for=203.0.113.5" } })).toBe("127.0.0.2")
  })

  it("is the TCP peer without TRUSTED_PROXIES, whatever the headers say", async () => {
    expect(await auditSource(direct, { headers: { "x-forwarded-for": "203.0.113.5" } })).toBe("127.0.0.1")
    expect(await auditSource(direct, { headers: { forwarded: "for=203.0.113.5" } })).toBe("127.0.0.1")
  })
})

describe(`the throttles count the client address (AUTH_FAILURE_LIMIT=${LIMIT})`, () => {
  it("admin: a forwarded client over the limit is refused; another forwarded client, the proxy and a direct client are not", async () => {
    const guesser = { "x-forwarded-for": someAddress() }
    for (let i = 0; i < LIMIT; i++) {
      expect((await send(proxied, "GET", "/admin/profiles", { token: WRONG_TOKEN, headers: guesser })).status).toBe(401)
    }
    expectRefused(await admin(proxied, "GET", "/admin/profiles", { headers: guesser }), ADMIN_TOO_MANY)
    expect((await admin(proxied, "GET", "/admin/profiles", { headers: { "x-forwarded-for": "203.0.113.51" } })).status).toBe(200)
    expect((await admin(proxied, "GET", "/admin/profiles", { headers: { "x-forwarded-for": "2001:db8::51" } })).status).toBe(200)
    expect((await admin(proxied, "GET", "/admin/profiles")).status).toBe(200)
    expect((await admin(proxied, "GET", "/admin/profiles", { from: "127.0.0.2" })).status).toBe(200)
    // A direct client naming the refused address is itself, not the refused client.
    expect((await admin(proxied, "GET", "/admin/profiles", { from: "127.0.0.2", headers: guesser })).status).toBe(200)
  })

  it("admin: a client connecting directly cannot escape its count by sending X-Forwarded-For", async () => {
    const from = `127.0.${randomInt(1, 255)}.${randomInt(3, 255)}`
    for (let i = 0; i < LIMIT; i++) {
      const headers = { "x-forwarded-for": someAddress() }
      expect((await send(proxied, "GET", "/admin/profiles", { from, token: WRONG_TOKEN, headers })).status).toBe(401)
    }
    const spoofed = { "x-forwarded-for": someAddress() }
    expectRefused(await admin(proxied, "GET", "/admin/profiles", { from, headers: spoofed }), ADMIN_TOO_MANY)
    expect((await admin(proxied, "GET", "/admin/profiles", { headers: spoofed })).status).toBe(200)
  })

  it("token endpoint: wrong secrets are charged to (client id, client address); the right secret works from elsewhere", async () => {
    const profile = fresh("throttle")
    expect((await admin(proxied, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await admin(proxied, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await admin(proxied, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      body: JSON.stringify({ auth_type: "oauth" })
    })
    expect(service.status).toBe(201)
    const uuid = (service.body as { uuid: string }).uuid
    const credential = await admin(proxied, "POST", `/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials`)
    expect(credential.status).toBe(201)
    const created = credential.body as { client_id: string; client_secret: string }
    const { tokenFields } = fixtureOf({ profile, environment: "prod", uuid }, created)

    const tokenRequest = (secret: string, call: Call) =>
      send(proxied, "POST", "/oauth/token", {
        ...call,
        headers: { "content-type": "application/x-www-form-urlencoded", ...call.headers },
        body: new URLSearchParams({ ...tokenFields, client_secret: secret }).toString()
      })
    const guesser = { "x-forwarded-for": someAddress() }
    for (let i = 0; i < LIMIT; i++) {
      expect((await tokenRequest("wrong-secret", { headers: guesser })).status).toBe(401)
    }
    expectRefused(await tokenRequest(created.client_secret, { headers: guesser }), CLIENT_TOO_MANY)
    for (
      const call of [
        { headers: { "x-forwarded-for": "203.0.113.61" } },
        {},
        { from: "127.0.0.2" },
        { from: "127.0.0.2", headers: guesser }
      ]
    ) {
      const issued = await tokenRequest(created.client_secret, call)
      expect(issued.status, JSON.stringify(call)).toBe(200)
      expect(typeof (issued.body as { access_token?: unknown }).access_token).toBe("string")
    }
  })
})

describe("TRUSTED_PROXIES that cannot be read", () => {
  const configured = (value: string) =>
    Effect.runSync(Effect.either(
      AppConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TRUSTED_PROXIES", value]]))))
    ))

  it("a malformed entry is a start-up error naming it; empty is none", () => {
    for (const entry of ["proxy.internal", "10.0.0.0/33", "::1/129", "10.0.0.1/8/2", "10.0.0.0/-1", "10.0.0.0/", "1.2.3"]) {
      const result = configured(`127.0.0.1,${entry}`)
      expect(Either.isLeft(result), entry).toBe(true)
      expect(Either.getLeft(result).pipe((o) => (o._tag === "Some" ? o.value.message : ""))).toBe(
        `invalid setting: TRUSTED_PROXIES must be a comma-separated list of IP addresses and CIDR ranges (e.g. 10.0.0.0/8,::1): "${entry}" is neither`
      )
    }
    for (const value of ["", " , ", "10.0.0.0/8", "::1, fd00::/8, 192.168.0.1/32, 0.0.0.0/0"]) {
      expect(Either.isRight(configured(value)), value).toBe(true)
    }
  })

  it("stops the server with one line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "trusted-proxies-"))
    dirs.push(dir)
    const { code, output } = await runToExit({ ADMIN_TOKEN, DATA_DIR: join(dir, "data"), TRUSTED_PROXIES: "10.0.0.0/33" })
    expect(code).toBe(1)
    expect(output.trim().split("\n")).toEqual([
      "service-auth could not start: invalid setting: TRUSTED_PROXIES must be a comma-separated list of IP addresses and CIDR ranges (e.g. 10.0.0.0/8,::1): \"10.0.0.0/33\" is neither"
    ])
  })
})
