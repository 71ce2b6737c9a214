/**
 * Signing-key rotation across two real `npm start` processes on one PostgreSQL database (a fresh
 * one, dropped afterwards): a key rotated on one instance with KEY_PUBLISH_DELAY_S=0 signs there at
 * once, and the other verifies its tokens from the first one (it reloads the keys for a kid it does
 * not hold); tokens of both keys verify on both; both publish both keys; `GET /admin/keys` agrees.
 * Needs TEST_DATABASE_URL (always set by .ci/run).
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminFetch } from "./support/AdminFetch.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")

const adminCall = (server: ServerProcess, method: string, path: string, body?: unknown) =>
  adminFetch(server.base, ADMIN_TOKEN, method, path, body)

const kidOf = (token: string): string => JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString("utf8")).kid

const jwksKids = async (server: ServerProcess) => {
  const response = await fetch(`${server.base}/.well-known/jwks.json`)
  expect(response.status).toBe(200)
  return ((await response.json()) as { keys: Array<{ kid: string }> }).keys.map((key) => key.kid).sort()
}

describe.skipIf(TEST_DATABASE_URL === undefined)("signing-key rotation on two instances sharing PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>
  let first: ServerProcess
  let second: ServerProcess

  beforeAll(async () => {
    database = await freshDatabase()
    const env = { DATABASE_URL: database.url, ADMIN_TOKEN, KEY_PUBLISH_DELAY_S: "0" } // Started together on an empty database: they race to create the first key, and agree on it.
    ;[first, second] = await Promise.all([startServer(env), startServer(env)])
  }, 120_000)

  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()])
    await database?.drop()
  })

  const fixture = async () => {
    const profile = `keys-${randomBytes(6).toString("hex")}`
    await adminCall(first, "PUT", `/admin/profiles/${profile}`)
    await adminCall(first, "PUT", `/admin/profiles/${profile}/environments/prod`)
    const service = await adminCall(first, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    const credential = await adminCall(
      first,
      "POST",
      `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}/credentials`
    )
    const token = async (server: ServerProcess) => {
      const response = await fetch(`${server.base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: credential.body.client_id,
          client_secret: credential.body.client_secret,
          profile,
          environment: "prod",
          service_uuid: service.body.uuid
        })
      })
      expect(response.status).toBe(200)
      return ((await response.json()) as { access_token: string }).access_token
    }
    const call = async (server: ServerProcess, token: string) =>
      (await fetch(`${server.base}/service/${profile}/prod/json/${service.body.uuid}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: "{}"
      })).status
    return { token, call }
  }

  it("rotate on one with no delay: tokens of both keys verify on both, both JWKS list both, /admin/keys agrees", async () => {
    const { call, token } = await fixture()
    const before = [await token(first), await token(second)]
    const oldKid = kidOf(before[0]!)
    expect(kidOf(before[1]!)).toBe(oldKid)
    expect(await jwksKids(first)).toEqual([oldKid])

    const rotated = await adminCall(first, "POST", "/admin/keys/rotate")
    expect(rotated.status).toBe(201)
    expect(rotated.body.status).toBe("active")
    const newKid: string = rotated.body.kid

    // The first instance signs with the new key at once; the second verifies it from the first token.
    const fromFirst = await token(first)
    expect(kidOf(fromFirst)).toBe(newKid)
    expect(await call(second, fromFirst)).toBe(200)
    expect(await call(first, fromFirst)).toBe(200)
    for (const old of before) {
      expect(await call(first, old)).toBe(200)
      expect(await call(second, old)).toBe(200)
    }
    // The second now signs with the new key too, and the first verifies it.
    const fromSecond = await token(second)
    expect(kidOf(fromSecond)).toBe(newKid)
    expect(await call(first, fromSecond)).toBe(200)

    expect(await jwksKids(first)).toEqual([oldKid, newKid].sort())
    expect(await jwksKids(second)).toEqual([oldKid, newKid].sort())
    const listed = [await adminCall(first, "GET", "/admin/keys"), await adminCall(second, "GET", "/admin/keys")]
    expect(listed.map((answer) => answer.status)).toEqual([200, 200])
    expect(listed[1]!.body).toEqual(listed[0]!.body)
    expect(listed[0]!.body.keys.map((key: { kid: string; status: string }) => [key.kid, key.status])).toEqual([
      [newKid, "active"],
      [oldKid, "retiring"]
    ])
    // The rotation's audit event was written with it, in the shared database: both instances list it.
    for (const server of [first, second]) {
      const trail = await adminCall(server, "GET", "/admin/audit?limit=500")
      expect(trail.body.events.filter((event: { action: string }) => event.action === "key.rotated")[0]).toMatchObject({
        actor: "admin",
        details: { kid: newKid }
      })
    }
  }, 60_000)

  it("a key rotated on one is in the other's JWKS on the very next request", async () => {
    const rotated = await adminCall(second, "POST", "/admin/keys/rotate")
    expect(rotated.status).toBe(201)
    expect(await jwksKids(first)).toContain(rotated.body.kid)
  }, 30_000)

  it("concurrent rotations on both instances each add one key, in one order both agree on", async () => {
    const before = (await adminCall(first, "GET", "/admin/keys")).body.keys.length
    const answers = await Promise.all([
      adminCall(first, "POST", "/admin/keys/rotate"),
      adminCall(second, "POST", "/admin/keys/rotate")
    ])
    expect(answers.map((answer) => answer.status)).toEqual([201, 201])
    const listed = [(await adminCall(first, "GET", "/admin/keys")).body, (await adminCall(second, "GET", "/admin/keys")).body]
    expect(listed[0].keys).toHaveLength(before + 2)
    expect(listed[1]).toEqual(listed[0])
    expect(listed[0].keys.filter((key: { status: string }) => key.status === "active")).toHaveLength(1)
  }, 30_000)
})
