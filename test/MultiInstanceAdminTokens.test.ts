/**
 * Stored admin tokens on two instances sharing PostgreSQL: a token created on one works on both,
 * carries its scope on both, and once revoked on one is refused by both at their next request.
 * No log line of either holds the token. Two real `npm start` processes on a database of their own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { adminFetch } from "./support/AdminFetch.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")

describe.skipIf(TEST_DATABASE_URL === undefined)("stored admin tokens on two instances of one PostgreSQL database", () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>
  let first: ServerProcess
  let second: ServerProcess

  beforeAll(async () => {
    database = await freshDatabase()
    const env = { DATABASE_URL: database.url, ADMIN_TOKEN, LOG_LEVEL: "debug" }
    ;[first, second] = await Promise.all([startServer(env), startServer(env)])
  }, 120_000)

  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()])
    await database?.drop()
  })

  it("a token made on one works on both with its scope; revoked on one, both refuse it at the next request", async () => {
    const profile = `shared-${randomBytes(4).toString("hex")}`
    const other = `other-${randomBytes(4).toString("hex")}`
    for (const name of [profile, other]) {
      expect((await adminFetch(first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${name}`)).status).toBe(201)
    }

    const created = await adminFetch(first.base, ADMIN_TOKEN, "POST", "/admin/tokens", {
      name: "customer",
      role: "owner",
      profiles: [profile]
    })
    expect(created.status).toBe(201)
    const token: string = created.body.token

    for (const server of [first, second]) {
      expect((await adminFetch(server.base, token, "GET", "/admin/session")).body).toEqual({
        name: "customer",
        role: "owner",
        profiles: [profile]
      })
      expect((await adminFetch(server.base, token, "GET", `/admin/profiles/${profile}`)).status).toBe(200)
      expect((await adminFetch(server.base, token, "GET", `/admin/profiles/${other}`)).status).toBe(404)
      expect((await adminFetch(server.base, token, "GET", "/admin/keys")).status).toBe(403)
    }
    expect((await adminFetch(second.base, token, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const trail = await adminFetch(first.base, ADMIN_TOKEN, "GET", `/admin/audit?profile=${profile}&limit=1`)
    expect(trail.body.events[0]).toMatchObject({ action: "environment.created", actor: "customer" })

    // The name is taken on the other instance too.
    expect((await adminFetch(second.base, ADMIN_TOKEN, "POST", "/admin/tokens", { name: "customer", role: "admin" })).status).toBe(409)

    expect((await adminFetch(second.base, ADMIN_TOKEN, "DELETE", "/admin/tokens/customer")).status).toBe(204)
    for (const server of [first, second]) {
      const refused = await adminFetch(server.base, token, "GET", `/admin/profiles/${profile}`)
      expect({ status: refused.status, body: refused.body }).toEqual({
        status: 401,
        body: { error: "unauthorized", error_description: "The admin token is not valid" }
      })
    }
    expect((await adminFetch(first.base, ADMIN_TOKEN, "DELETE", "/admin/tokens/customer")).status).toBe(404)
    for (const server of [first, second]) expect(server.log()).not.toContain(token)
  })
})
