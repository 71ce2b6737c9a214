/**
 * Both entries of the hot endpoints, the fast lane and the HttpApi app, hand each request to one
 * execution per endpoint (`HotEndpoints`), so their answers agree by construction; what differs is
 * how each reads the request: the lane a body of declared length, the app a chunked one, a query
 * string or a percent-encoded path. These cases check those readings, and the execution's two ways
 * to a token (all in memory, or through storage when `last_used_at` is due), answer for answer, byte
 * for byte. Two real servers, each on a fresh data directory with the same profile, environment and
 * service uuids (the second at LOG_LEVEL=debug). The same requests go to both, in the same order: to
 * the first as given (the fast lane answers), to the second with a chunked body (the app answers).
 * The answers must match: status, headers (but Date) and body (but the values each server
 * generates: client ids, secrets, tokens).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FastCheck as fc } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basicAuthorization, formEncode, type RawRequest, rawRequest, type RawResponse } from "./support/Http.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const PROFILE = "acme"
const ENVIRONMENT = "production"
const OAUTH_UUID = "6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7"
const OPEN_UUID = "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10"

interface Side {
  readonly server: ServerProcess
  readonly port: number
  /** The server's own credentials of the oauth service, oldest first. */
  readonly credentials: Array<{ client_id: string; client_secret: string }>
  /** Tokens issued by this server, by label. */
  readonly tokens: Map<string, string>
}

const dirs: Array<string> = []
let lane: Side
let app: Side

const admin = async (side: Side, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${side.server.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/** Both servers sign with this key: generating one on a fresh data directory is slow on a loaded machine. */
const signingKeyFile = () => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-lane-key-"))
  dirs.push(dir)
  const file = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(file, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })
  return file
}

const start = async (logLevel: string, keyFile: string): Promise<Side> => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-lane-"))
  dirs.push(dir)
  const server = await startServer({
    ADMIN_TOKEN,
    DATA_DIR: join(dir, "data"),
    LOG_LEVEL: logLevel,
    ISSUER: "http://issuer.test",
    SIGNING_KEY_FILE: keyFile
  })
  const side: Side = { server, port: server.port, credentials: [], tokens: new Map() }
  expect((await admin(side, "PUT", `/admin/profiles/${PROFILE}`, {})).status).toBe(201)
  expect((await admin(side, "PUT", `/admin/profiles/${PROFILE}/environments/${ENVIRONMENT}`, {})).status).toBe(201)
  const services = `/admin/profiles/${PROFILE}/environments/${ENVIRONMENT}/services`
  expect((await admin(side, "PUT", `${services}/${OAUTH_UUID}`, { name: "billing", auth_type: "oauth" })).status).toBe(201)
  expect((await admin(side, "PUT", `${services}/${OPEN_UUID}`, { name: "open", auth_type: "none" })).status).toBe(201)
  for (let i = 0; i < 2; i++) {
    const created = await admin(side, "POST", `${services}/${OAUTH_UUID}/credentials`, {})
    expect(created.status).toBe(201)
    side.credentials.push(created.body)
  }
  return side
}

beforeAll(async () => {
  const keyFile = signingKeyFile()
  // One after the other: two fresh embedded databases migrating at once can miss the start deadline.
  lane = await start("warning", keyFile)
  app = await start("debug", keyFile)
}, 120_000)

afterAll(async () => {
  await Promise.all([lane?.server.stop(), app?.server.stop()])
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** What differs between the two servers by construction is replaced by placeholders. */
const normalize = (side: Side, response: RawResponse) => {
  let text = response.text
  side.credentials.forEach((credential, i) => {
    text = text.split(credential.client_id).join(`<client ${i}>`).split(credential.client_secret).join(`<secret ${i}>`)
  })
  text = text.replace(/"access_token":"[A-Za-z0-9_.-]+"/g, `"access_token":"<token>"`)
  const { date: _date, ...headers }: Record<string, string> = response.headers
  // Seconds left in a brute-force window: the two servers opened theirs a few milliseconds apart.
  if (headers["retry-after"] !== undefined && response.status === 429) {
    expect(Number(headers["retry-after"])).toBeGreaterThan(0)
    expect(Number(headers["retry-after"])).toBeLessThanOrEqual(60)
    headers["retry-after"] = "<seconds>"
  }
  return { status: response.status, headers, text }
}

/** A request described once, made concrete for each server (its own credentials and tokens). */
type Scenario = (side: Side) => RawRequest

const both = async (scenario: Scenario) => {
  const toApp = scenario(app)
  const [fromLane, fromApp] = [
    await rawRequest(lane.port, scenario(lane)),
    // A chunked body is never the fast path's: the app's router answers it.
    await rawRequest(app.port, toApp.body === undefined || toApp.pieces !== undefined ? toApp : { ...toApp, chunked: true })
  ]
  return { lane: normalize(lane, fromLane), app: normalize(app, fromApp), raw: { lane: fromLane, app: fromApp } }
}

const expectSame = async (scenario: Scenario, expectedStatus?: number) => {
  const { app: fromApp, lane: fromLane, raw } = await both(scenario)
  expect(fromLane, `${JSON.stringify(scenario(lane)).slice(0, 300)}`).toEqual(fromApp)
  if (expectedStatus !== undefined) expect(fromLane.status).toBe(expectedStatus)
  return raw
}

const FORM = { "content-type": "application/x-www-form-urlencoded" }
const form = (fields: Record<string, string>) =>
  Object.entries(fields).map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")
const tokenFields = (side: Side, credential = 0, uuid = OAUTH_UUID) => ({
  grant_type: "client_credentials",
  client_id: side.credentials[credential]!.client_id,
  client_secret: side.credentials[credential]!.client_secret,
  profile: PROFILE,
  environment: ENVIRONMENT,
  service_uuid: uuid
})
const tokenPost = (fields: (side: Side) => Record<string, string>): Scenario => (side) => ({
  method: "POST",
  path: "/oauth/token",
  headers: FORM,
  body: form(fields(side))
})
const callPath = (uuid = OAUTH_UUID) => `/service/${PROFILE}/${ENVIRONMENT}/json/${uuid}`
const call = (token: (side: Side) => string | undefined, body = `{"amount":42}`, uuid = OAUTH_UUID): Scenario => (side) => {
  const value = token(side)
  return {
    method: "POST",
    path: callPath(uuid),
    headers: { "content-type": "application/json", ...(value === undefined ? {} : { authorization: `Bearer ${value}` }) },
    body
  }
}

/** Issues a token on both servers and keeps each under `label`. */
const issue = async (label: string, credential = 0) => {
  const raw = await expectSame(tokenPost((side) => tokenFields(side, credential)), 200)
  lane.tokens.set(label, JSON.parse(raw.lane.text).access_token)
  app.tokens.set(label, JSON.parse(raw.app.text).access_token)
}

describe("both entries answer alike", () => {
  it("token requests (post and basic), before and after last_used_at is recorded", async () => {
    await issue("first") // last_used_at is null: the app records it
    await issue("second") // now the lane answers
    await expectSame((side) => {
      const { client_id, client_secret, ...target } = tokenFields(side)
      return {
        method: "POST",
        path: "/oauth/token",
        headers: { ...FORM, authorization: basicAuthorization(client_id, client_secret) },
        body: form(target)
      }
    }, 200)
    // last_used_at was recorded on both.
    for (const side of [lane, app]) {
      const listed = await admin(side, "GET", `/admin/profiles/${PROFILE}/environments/${ENVIRONMENT}/services/${OAUTH_UUID}/credentials`)
      expect(listed.body.credentials[0].last_used_at).not.toBeNull()
    }
  }, 30_000)

  it("service calls: oauth and open services, bodies the lane takes and bodies it hands over", async () => {
    await issue("call")
    const token = (side: Side) => side.tokens.get("call")!
    for (const body of [`{"nested":{"a":[1,2,{"b":null}]},"text":"é ✓ \\u0000"}`, `[1]`, `{`, ``]) {
      await expectSame(call(token, body))
      await expectSame(call(() => undefined, body, OPEN_UUID))
      await expectSame(call(token, body, OPEN_UUID))
    }
    await expectSame(call(token), 200)
    await expectSame(call(() => undefined), 401)
    await expectSame(call((side) => `${token(side)}x`), 401)
    await expectSame((side) => ({ ...call(token)(side), path: callPath(OAUTH_UUID.toUpperCase()) }), 200)
    await expectSame((side) => ({ ...call(token)(side), path: `${callPath()}?q=1` }))
    await expectSame((side) => ({ ...call(token)(side), chunked: true }), 200)
    await expectSame((side) => ({ ...call(token)(side), headers: { authorization: `Basic ${token(side)}` } }), 400)
  }, 60_000)

  it("a deleted credential: its tokens are refused from the next call on, and it gets no new token", async () => {
    await issue("doomed", 1)
    await issue("doomed again", 1)
    const doomed = (side: Side) => side.tokens.get("doomed")!
    await expectSame(call(doomed), 200)
    await expectSame(call(doomed), 200)
    for (const side of [lane, app]) {
      const path = `/admin/profiles/${PROFILE}/environments/${ENVIRONMENT}/services/${OAUTH_UUID}/credentials/${
        side.credentials[1]!.client_id
      }`
      expect((await admin(side, "DELETE", path)).status).toBe(204)
    }
    await expectSame(call(doomed), 401)
    await expectSame(tokenPost((side) => tokenFields(side, 1)), 401)
  }, 30_000)
})

describe("differential property: random variations of valid requests get the same answer from both", () => {
  it("token requests and service calls, some with hostile bodies", async () => {
    await issue("property", 0)
    const fields = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const
    const tokenVariation = fc.record({
      drop: fc.option(fc.constantFrom(...fields), { nil: undefined }),
      replace: fc.option(
        fc.tuple(
          fc.constantFrom(...fields),
          fc.constantFrom("", "x", "svc_00000000000000000000000000000000", OPEN_UUID, "ACME", "client_credentials")
        ),
        { nil: undefined }
      ),
      duplicate: fc.option(fc.constantFrom(...fields), { nil: undefined }),
      contentType: fc.constantFrom(
        "application/x-www-form-urlencoded",
        "application/x-www-form-urlencoded; charset=utf-8",
        "application/json",
        "text/plain"
      ),
      basic: fc.boolean()
    }).map((v): Scenario => (side) => {
      const all: Record<string, string> = { ...tokenFields(side) }
      if (v.replace !== undefined) all[v.replace[0]] = v.replace[1]
      if (v.drop !== undefined) delete all[v.drop]
      let body = form(all)
      if (v.duplicate !== undefined && all[v.duplicate] !== undefined) body += `&${v.duplicate}=${formEncode(all[v.duplicate]!)}`
      const headers: Record<string, string> = { "content-type": v.contentType }
      if (v.basic && all.client_id !== undefined && all.client_secret !== undefined) {
        headers.authorization = basicAuthorization(all.client_id, all.client_secret)
        const { client_id: _, client_secret: __, ...rest } = all
        body = form(rest)
      }
      return { method: "POST", path: "/oauth/token", headers, body }
    })
    const callVariation = fc.record({
      uuid: fc.constantFrom(OAUTH_UUID, OPEN_UUID, OAUTH_UUID.toUpperCase(), "6f1c2a3b-4d5e-4f60-8a71-000000000000"),
      token: fc.constantFrom("property", "call", "doomed", "none", "garbage"),
      scheme: fc.constantFrom("Bearer", "bearer", "Basic", "Bearer  "),
      body: fc.constantFrom(`{"a":1}`, `{}`, `[]`, `{"a":`, ``, `{"deep":${"[".repeat(70)}${"]".repeat(70)}}`),
      contentType: fc.constantFrom("application/json", "text/plain", undefined)
    }).map((v): Scenario => (side) => {
      const token = v.token === "none" ? undefined : v.token === "garbage" ? "a.b.c" : side.tokens.get(v.token)
      const headers: Record<string, string> = {}
      if (v.contentType !== undefined) headers["content-type"] = v.contentType
      if (token !== undefined) headers.authorization = `${v.scheme} ${token}`
      return { method: "POST", path: `/service/${PROFILE}/${ENVIRONMENT}/json/${v.uuid}`, headers, body: v.body }
    })
    // Raw bodies, hostile or not, behind each endpoint's valid headers.
    const rawBody = fc.oneof(
      fc.uint8Array({ maxLength: 512 }).map((bytes): Uint8Array | string => bytes),
      fc.constantFrom<Uint8Array | string>(
        Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28]),
        "grant_type=client_credentials&client_id=%ff%fe&client_secret=%00",
        "grant_type=client_credentials&client_id=svc_%00",
        `{"a":"\u0000\ud800"}`,
        `{"a":${"[".repeat(100)}${"]".repeat(100)}}`,
        "x".repeat(70_000)
      )
    )
    const rawVariation = fc.tuple(rawBody, fc.boolean()).map(([body, toToken]): Scenario => (side) =>
      toToken
        ? { ...tokenPost((s) => tokenFields(s))(side), body }
        : { ...call((s) => s.tokens.get("property"))(side), body }
    )
    await fc.assert(
      fc.asyncProperty(fc.oneof(tokenVariation, callVariation, rawVariation), async (scenario) => {
        const { app: fromApp, lane: fromLane } = await both(scenario)
        expect(fromLane).toEqual(fromApp)
      }),
      // A sample of the readings: the answers themselves are one execution's.
      { numRuns: 40 }
    )
    // And both still answer normally.
    await expectSame(call((side) => side.tokens.get("property")!), 200)
  }, 120_000)
})

describe("brute force through both", () => {
  it("brute force: failures are counted the same, and the pair stays refused even with the right secret", async () => {
    // A credential of its own: the failures of earlier tests (in another minute) do not count here.
    for (const side of [lane, app]) {
      const created = await admin(
        side,
        "POST",
        `/admin/profiles/${PROFILE}/environments/${ENVIRONMENT}/services/${OAUTH_UUID}/credentials`,
        {}
      )
      expect(created.status).toBe(201)
      side.credentials.push(created.body)
    }
    const fresh = (side: Side) => tokenFields(side, side.credentials.length - 1)
    await expectSame(tokenPost(fresh), 200)
    await expectSame(tokenPost(fresh), 200)
    const wrong = (side: Side) => ({ ...fresh(side), client_secret: "wrong" })
    for (let i = 0; i < 20; i++) await expectSame(tokenPost(wrong), 401)
    await expectSame(tokenPost(wrong), 429)
    await expectSame(tokenPost(fresh), 429)
  }, 30_000)
})
