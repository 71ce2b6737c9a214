/**
 * What one client can hold, and what it can pass for (docs/contract.md §5, docs/operators.md):
 * real servers, one with the default limits and one with short ones behind a trusted proxy.
 *
 * - a request whose headers or body do not arrive in time is answered 408 and its connection
 *   closed, within seconds by default (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS), on the fast lane's
 *   endpoints and the app's alike;
 * - a few hundred slow connections from one address leave another address served
 *   (MAX_CONNECTIONS_PER_ADDRESS); behind a trusted proxy the cap counts forwarded client addresses;
 * - two `Authorization` headers are `400 invalid_request` at every endpoint that reads the header,
 *   never the first one used;
 * - an admin token cannot be named as the server's own actors, ADMIN_TOKEN's, or a client id.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { layer } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfig } from "../src/config/AppConfig.js"
import { fixtureOf, type JsonResponse, makeTestServer, serverPort } from "../src/testing.js"
import { asJsonResponse, rawRequest } from "./support/Http.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const METRICS_TOKEN = randomBytes(24).toString("base64url")
const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL
/** The short limits' server: its proxy connects from this address. */
const PROXY = "127.0.0.3"
const SHORT_CAP = 3

const dirs: Array<string> = []
const servers: Array<ServerProcess> = []
/** Every limit at its default. */
let defaults: ServerProcess
/** HEADERS_TIMEOUT_MS=1000, REQUEST_TIMEOUT_MS=2000, MAX_CONNECTIONS_PER_ADDRESS=3, behind PROXY. */
let short: ServerProcess

const start = async (env: Record<string, string>) => {
  const dir = mkdtempSync(join(tmpdir(), "connections-"))
  dirs.push(dir)
  const storage = DATABASE_URL === undefined ? { DATA_DIR: join(dir, "data") } : { DATABASE_URL }
  const server = await startServer({ ADMIN_TOKEN, ...storage, ...env }, { healthTimeoutMs: 150_000 })
  servers.push(server)
  return server
}

beforeAll(async () => {
  ;[defaults, short] = await Promise.all([
    start({ METRICS_TOKEN }),
    start({
      HEADERS_TIMEOUT_MS: "1000",
      REQUEST_TIMEOUT_MS: "2000",
      MAX_CONNECTIONS_PER_ADDRESS: String(SHORT_CAP),
      TRUSTED_PROXIES: PROXY
    })
  ])
}, 180_000)

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()))
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

interface Held {
  readonly socket: Socket
  /** What the server sent, and when the connection closed (ms after it opened), once it has. */
  readonly received: () => string
  readonly closed: Promise<number>
  readonly isClosed: () => boolean
}

/** A connection that sends `bytes` and then nothing more, until the server closes it. */
const hold = (server: ServerProcess, bytes: string, localAddress = "127.0.0.1"): Promise<Held> =>
  new Promise((resolve, reject) => {
    const opened = Date.now()
    let received = ""
    let closedAt: number | undefined
    const socket = connect({ host: "127.0.0.1", port: server.port, localAddress })
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("utf8")))
    socket.on("error", () => {})
    const closed = new Promise<number>((done) =>
      socket.once("close", () => {
        closedAt = Date.now() - opened
        done(closedAt)
      })
    )
    socket.once("connect", () => {
      if (bytes !== "") socket.write(bytes)
      resolve({ socket, received: () => received, closed, isClosed: () => closedAt !== undefined })
    })
    socket.once("close", () => reject(new Error("closed before it connected")))
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const PARTIAL_HEADERS = "POST /oauth/token HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-u"
/** A request announcing 1000 bytes of body and sending 13. */
const partialBody = (path: string, contentType = "application/x-www-form-urlencoded", extraHeaders = "") =>
  `POST ${path} HTTP/1.1\r\nHost: localhost\r\n${extraHeaders}Content-Type: ${contentType}\r\n` +
  "Content-Length: 1000\r\n\r\ngrant_type=cl"
const partialChunkedBody = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
  "Transfer-Encoding: chunked\r\n\r\nd\r\ngrant_type=cl\r\n"

const TIMED_OUT = { error: "invalid_request", error_description: "The request did not arrive in time" }

/** The one answer a held connection got: a 408 with the contract's JSON body. */
const expectTimedOut = (held: Held) => {
  const text = held.received()
  expect(text.startsWith("HTTP/1.1 408 "), text).toBe(true)
  expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual(TIMED_OUT)
}

interface Call {
  readonly from?: string
  readonly headers?: Record<string, string | ReadonlyArray<string>>
  readonly body?: string
  readonly chunked?: boolean
}

const send = (server: ServerProcess, method: string, path: string, call: Call = {}): Promise<JsonResponse> =>
  rawRequest(server.port, {
    method,
    path,
    localAddress: call.from ?? "127.0.0.1",
    headers: { ...(call.body === undefined ? {} : { "content-type": "application/json" }), ...call.headers },
    ...(call.body === undefined ? {} : { body: call.body }),
    ...(call.chunked === true ? { chunked: true } : {})
  }).then(asJsonResponse)

const admin = (server: ServerProcess, method: string, path: string, call: Call = {}) =>
  send(server, method, path, { ...call, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...call.headers } })

const fresh = (prefix: string) => `${prefix}-${randomBytes(4).toString("hex")}`

describe("slow clients are cut off", () => {
  it("by default within seconds: headers in about 10 s, the whole request in about 20 s, each answered 408", async () => {
    const headers = await hold(defaults, PARTIAL_HEADERS)
    const body = await hold(defaults, partialBody("/oauth/token"))
    const [headersMs, bodyMs] = await Promise.all([headers.closed, body.closed])
    expect(headersMs).toBeGreaterThanOrEqual(9_000)
    expect(headersMs).toBeLessThan(15_000)
    expect(bodyMs).toBeGreaterThanOrEqual(19_000)
    expect(bodyMs).toBeLessThan(25_000)
    expectTimedOut(headers)
    expectTimedOut(body)
  }, 40_000)

  it("as configured, on the fast lane and the app alike: a 408 while no answer has begun, then the connection closed", async () => {
    const held = await Promise.all([
      hold(short, ""),
      hold(short, PARTIAL_HEADERS),
      // The fast lane reads declared-length token and service call bodies; the app, chunked ones and the rest.
      hold(short, partialBody("/oauth/token")),
      hold(short, partialBody(`/service/p/e/json/${crypto.randomUUID()}`, "application/json"), "127.0.0.4"),
      hold(short, partialChunkedBody("/oauth/token"), "127.0.0.4"),
      hold(short, partialBody("/oauth/revoke"), "127.0.0.5"),
      hold(short, partialBody("/admin/tokens", "application/json", `Authorization: Bearer ${ADMIN_TOKEN}\r\n`), "127.0.0.5")
    ])
    const closedMs = await Promise.all(held.map((connection) => connection.closed))
    for (const [index, ms] of closedMs.entries()) {
      expect(ms, `connection ${index}`).toBeLessThan(6_000)
    }
    // Not found before the body is read: the service call was answered at once, then cut.
    const [nothing, headers, tokenBody, serviceBody, chunkedBody, revokeBody, adminBody] = held
    for (const connection of [nothing!, headers!, tokenBody!, chunkedBody!, revokeBody!, adminBody!]) {
      expectTimedOut(connection)
    }
    expect(serviceBody!.received().startsWith("HTTP/1.1 404 ")).toBe(true)
  }, 30_000)

  it("300 slow connections from one address leave another address served", async () => {
    const crowd = await Promise.all(Array.from({ length: 300 }, () => hold(defaults, PARTIAL_HEADERS)))
    try {
      await sleep(500)
      // Those over the cap are closed as they are accepted; the rest wait for HEADERS_TIMEOUT_MS.
      const closed = crowd.filter((connection) => connection.isClosed()).length
      expect(closed).toBeGreaterThanOrEqual(300 - 128)
      expect(closed).toBeLessThan(300)
      const other = await send(defaults, "GET", "/healthz", { from: "127.0.0.2" })
      expect(other.status).toBe(200)
      const token = await send(defaults, "POST", "/oauth/token", {
        from: "127.0.0.2",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "grant_type=client_credentials"
      })
      expect(token.body).toEqual({ error: "invalid_request", error_description: "Missing required parameters" })
      // The crowded address itself gets no more while its connections are held: closed unanswered.
      const refused = await hold(defaults, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
      expect(await refused.closed).toBeLessThan(2_000)
      expect(refused.received()).toBe("")
    } finally {
      for (const connection of crowd) connection.socket.destroy()
    }
    await sleep(300)
    expect((await send(defaults, "GET", "/healthz")).status).toBe(200)
  }, 60_000)

  it("behind a trusted proxy the cap counts each forwarded client address, answered 503", async () => {
    const forwarded = (address: string) =>
      partialBody("/oauth/token").replace("Host: localhost\r\n", `Host: localhost\r\nX-Forwarded-For: ${address}\r\n`)
    const crowd = await Promise.all(Array.from({ length: SHORT_CAP }, () => hold(short, forwarded("198.51.100.7"), PROXY)))
    try {
      await sleep(200)
      const over = await send(short, "GET", "/healthz", { from: PROXY, headers: { "x-forwarded-for": "198.51.100.7" } })
      expect(over.status).toBe(503)
      expect(over.headers["retry-after"]).toBe("1")
      expect(over.body).toEqual({
        error: "temporarily_unavailable",
        error_description: "Too many open connections from this client address"
      })
      // Another client behind the same proxy, and the proxy's own connections, are not counted with it.
      expect((await send(short, "GET", "/healthz", { from: PROXY, headers: { "x-forwarded-for": "198.51.100.8" } })).status)
        .toBe(200)
      expect((await send(short, "GET", "/healthz", { from: PROXY })).status).toBe(200)
      expect(crowd.every((connection) => !connection.isClosed())).toBe(true)
    } finally {
      for (const connection of crowd) connection.socket.destroy()
    }
  }, 30_000)
})

describe("two Authorization headers are 400 invalid_request wherever the header is read", () => {
  const MULTIPLE = { error: "invalid_request", error_description: "Multiple Authorization headers" }
  let fixture: ReturnType<typeof fixtureOf>
  let accessToken: string
  const basic = () => `Basic ${Buffer.from(`${fixture.clientId}:${fixture.clientSecret}`).toString("base64")}`

  beforeAll(async () => {
    const profile = fresh("twice")
    expect((await admin(defaults, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await admin(defaults, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await admin(defaults, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      body: JSON.stringify({ auth_type: "oauth" })
    })
    const uuid = (service.body as { uuid: string }).uuid
    const credential = await admin(defaults, "POST", `/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials`)
    fixture = fixtureOf({ profile, environment: "prod", uuid }, credential.body as { client_id: string; client_secret: string })
    const issued = await send(defaults, "POST", "/oauth/token", {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fixture.tokenFields).toString()
    })
    expect(issued.status).toBe(200)
    accessToken = (issued.body as { access_token: string }).access_token
  }, 60_000)

  it("the service call, on the fast lane and the app: with the gateway's invalid_request challenge", async () => {
    const path = `/service/${fixture.profile}/prod/json/${fixture.uuid}`
    const one = await send(defaults, "POST", path, { headers: { authorization: `Bearer ${accessToken}` }, body: "{}" })
    expect(one.status).toBe(200)
    for (const chunked of [false, true]) {
      for (const pair of [[`Bearer ${accessToken}`, `Bearer ${accessToken}`], [`Bearer ${accessToken}`, "Bearer forged"]]) {
        const twice = await send(defaults, "POST", path, { headers: { authorization: pair }, body: "{}", chunked })
        expect(twice.status).toBe(400)
        expect(twice.body).toEqual(MULTIPLE)
        expect(twice.headers["www-authenticate"]).toBe(`Bearer realm="service", error="invalid_request"`)
      }
    }
  })

  it("the token endpoint, on the fast lane and the app: its OAuth body, no-store", async () => {
    const { client_id: _id, client_secret: _secret, ...target } = fixture.tokenFields
    for (const chunked of [false, true]) {
      const twice = await send(defaults, "POST", "/oauth/token", {
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: [basic(), basic()] },
        body: new URLSearchParams(target).toString(),
        chunked
      })
      expect(twice.status).toBe(400)
      expect(twice.body).toEqual(MULTIPLE)
      expect(twice.headers["cache-control"]).toBe("no-store")
    }
  })

  it("revocation and introspection", async () => {
    const revoke = await send(defaults, "POST", "/oauth/revoke", {
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: [basic(), basic()] },
      body: new URLSearchParams({ token: accessToken }).toString()
    })
    expect(revoke.status).toBe(400)
    expect(revoke.body).toEqual(MULTIPLE)
    expect(revoke.headers["cache-control"]).toBe("no-store")
    const introspect = await send(defaults, "POST", "/oauth/introspect", {
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: [`Bearer ${ADMIN_TOKEN}`, `Bearer ${ADMIN_TOKEN}`]
      },
      body: new URLSearchParams({ token: accessToken }).toString()
    })
    expect(introspect.status).toBe(400)
    expect(introspect.body).toEqual(MULTIPLE)
    expect(introspect.headers["cache-control"]).toBe("no-store")
    // The token was neither revoked nor reported: the requests were refused.
    const path = `/service/${fixture.profile}/prod/json/${fixture.uuid}`
    expect((await send(defaults, "POST", path, { headers: { authorization: `Bearer ${accessToken}` }, body: "{}" })).status)
      .toBe(200)
  })

  it("the admin API and the metrics", async () => {
    const session = await send(defaults, "GET", "/admin/session", {
      headers: { authorization: [`Bearer ${ADMIN_TOKEN}`, `Bearer ${ADMIN_TOKEN}`] }
    })
    expect(session.status).toBe(400)
    expect(session.body).toEqual(MULTIPLE)
    const metrics = await send(defaults, "GET", "/metrics", {
      headers: { authorization: [`Bearer ${METRICS_TOKEN}`, `Bearer ${METRICS_TOKEN}`] }
    })
    expect(metrics.status).toBe(400)
    expect(metrics.body).toEqual(MULTIPLE)
    expect((await send(defaults, "GET", "/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status)
      .toBe(200)
  })
})

describe("admin token names cannot pass for another actor", () => {
  const RESERVED = ["credential-expiry", "key-rotation-schedule", "Credential-Expiry", "ADMIN", `svc_${"0a".repeat(16)}`, "svc_x"]

  it("POST /admin/tokens answers 400 naming the field; admin itself stays ADMIN_TOKEN's (409)", async () => {
    for (const name of RESERVED) {
      const created = await admin(defaults, "POST", "/admin/tokens", { body: JSON.stringify({ name, role: "admin" }) })
      expect(created.status, name).toBe(400)
      const body = created.body as { error: string; error_description: string }
      expect(body.error).toBe("invalid_request")
      expect(body.error_description).toBe(
        "name: name must be neither credential-expiry nor key-rotation-schedule (the server's own names in the audit trail), " +
          "nor admin (ADMIN_TOKEN's), in any case, nor beginning with svc_ (a client id's form)"
      )
    }
    expect((await admin(defaults, "POST", "/admin/tokens", { body: JSON.stringify({ name: "admin", role: "admin" }) })).status)
      .toBe(409)
    const allowed = await admin(defaults, "POST", "/admin/tokens", {
      body: JSON.stringify({ name: fresh("expiry-watcher"), role: "admin" })
    })
    expect(allowed.status).toBe(201)
  })

  const configured = (env: Record<string, string>) =>
    Effect.runSync(Effect.either(AppConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))))
  const strong = () => randomBytes(24).toString("base64url")

  it("ADMIN_TOKENS with such a name is a start-up error naming it", () => {
    for (const name of RESERVED) {
      const result = configured({ ADMIN_TOKENS: `ops:${strong()},${name}:${strong()}` })
      expect(Either.isLeft(result), name).toBe(true)
      if (Either.isLeft(result)) expect(String(result.left.message)).toContain(`entry 2 of 2: the name ${name} is reserved`)
    }
    expect(Either.isRight(configured({ ADMIN_TOKENS: `ops:${strong()},credential-expiry-reader:${strong()}` }))).toBe(true)
  })

  it("the time limits are checked at start-up", () => {
    for (const env of [{ HEADERS_TIMEOUT_MS: "0" }, { REQUEST_TIMEOUT_MS: "soon" }, { MAX_CONNECTIONS_PER_ADDRESS: "-1" }]) {
      expect(Either.isLeft(configured(env)), JSON.stringify(env)).toBe(true)
    }
    const inverted = configured({ HEADERS_TIMEOUT_MS: "30000", REQUEST_TIMEOUT_MS: "20000" })
    expect(Either.isLeft(inverted)).toBe(true)
    if (Either.isLeft(inverted)) {
      expect(String(inverted.left.message)).toContain("HEADERS_TIMEOUT_MS (30000) must not exceed REQUEST_TIMEOUT_MS")
    }
    const settled = configured({ HEADERS_TIMEOUT_MS: "5000", REQUEST_TIMEOUT_MS: "5000", MAX_CONNECTIONS_PER_ADDRESS: "16" })
    expect(Either.getOrThrow(settled)).toMatchObject({ headersTimeoutMs: 5_000, requestTimeoutMs: 5_000, maxConnectionsPerAddress: 16 })
  })
})

const OPS_TOKEN = randomBytes(24).toString("base64url")

layer(makeTestServer({ config: { adminTokens: [{ name: "ops", token: Redacted.make(OPS_TOKEN) }] } }))(
  "without ADMIN_TOKEN",
  (it) => {
    it.effect("a stored token may not be named admin either: it would pass for ADMIN_TOKEN (400)", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const created = yield* Effect.promise(() =>
          rawRequest(port, {
            method: "POST",
            path: "/admin/tokens",
            headers: { authorization: `Bearer ${OPS_TOKEN}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "admin", role: "admin" })
          })
        )
        expect(created.status).toBe(400)
        expect(JSON.parse(created.text)).toEqual({
          error: "invalid_request",
          error_description: "name: name must be neither credential-expiry nor key-rotation-schedule (the server's own " +
            "names in the audit trail), nor admin (ADMIN_TOKEN's), in any case, nor beginning with svc_ (a client id's form)"
        })
      }))
  }
)
