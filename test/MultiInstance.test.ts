/**
 * Several instances on one PostgreSQL database (docs/contract.md §2): a deletion acknowledged by one
 * instance is refused by the other on the very next request, both accept each other's tokens, and
 * failed client authentications count once for both.
 * Two real `npm start` processes; needs TEST_DATABASE_URL (always set by .ci/run).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminFetch } from "./support/AdminFetch.js"

const DATABASE_URL = process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

describe.skipIf(DATABASE_URL === undefined)("two instances on one PostgreSQL database", () => {
  let first: ServerProcess
  let second: ServerProcess

  beforeAll(async () => {
    // Started together: they race to migrate and to create the shared keys.
    ;[first, second] = await Promise.all([
      startServer({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN, AUTH_FAILURE_LIMIT: "6" }),
      startServer({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN, AUTH_FAILURE_LIMIT: "6" })
    ])
  }, 120_000)

  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()])
  })

  const adminCall = (server: ServerProcess, method: string, path: string, body?: unknown) =>
    adminFetch(server.base, ADMIN_TOKEN, method, path, body)

  const callService = (server: ServerProcess, path: string, token: string) =>
    fetch(`${server.base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}"
    })

  it("shares signing keys and refuses a deleted credential's token on the other instance at once", async () => {
    const profile = `multi-${randomBytes(6).toString("hex")}`
    expect((await adminCall(first, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await adminCall(first, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await adminCall(first, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    const servicePath = `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}`
    const credential = await adminCall(first, "POST", `${servicePath}/credentials`)
    expect(credential.status).toBe(201)

    // A token issued by the first instance...
    const tokenResponse = await fetch(`${first.base}/oauth/token`, {
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
    expect(tokenResponse.status).toBe(200)
    const { access_token } = await tokenResponse.json() as { access_token: string }

    // ...works on the second,
    const callPath = `/service/${profile}/prod/json/${service.body.uuid}`
    expect((await callService(second, callPath, access_token)).status).toBe(200)

    // and once the first acknowledges the deletion, the second refuses it on the very next request.
    expect((await adminCall(first, "DELETE", `${servicePath}/credentials/${credential.body.client_id}`)).status).toBe(204)
    const refused = await callService(second, callPath, access_token)
    expect(refused.status).toBe(401)
    expect(refused.headers.get("www-authenticate")).toBe(`Bearer realm="service", error="invalid_token"`)
    expect(await refused.json()).toMatchObject({ error: "invalid_token" })
    expect((await callService(first, callPath, access_token)).status).toBe(401)
  })

  it("brute force: failures spread over both instances count once; the pair is refused on both", async () => {
    const profile = `multi-${randomBytes(6).toString("hex")}`
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
    const attempt = (server: ServerProcess, secret: string) =>
      fetch(`${server.base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: credential.body.client_id,
          client_secret: secret,
          profile,
          environment: "prod",
          service_uuid: service.body.uuid
        })
      })
    // The right secret works on both, and nothing is counted for it.
    expect((await attempt(first, credential.body.client_secret)).status).toBe(200)
    expect((await attempt(second, credential.body.client_secret)).status).toBe(200)
    // Six failures, alternating: the limit is 6 for the pair, not 6 per instance.
    for (let i = 0; i < 6; i++) expect((await attempt(i % 2 === 0 ? first : second, "wrong")).status).toBe(401)
    // The instance that recorded the sixth knows at once; the other learns it with its next failure,
    // which got no attempt: refused, not evaluated.
    const last = await attempt(second, credential.body.client_secret)
    expect(last.status).toBe(429)
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThan(0)
    const other = await attempt(first, "wrong")
    expect(other.status).toBe(429)
    for (const server of [first, second]) expect((await attempt(server, credential.body.client_secret)).status).toBe(429)
  })

  it("publishes the same JWKS from both instances", async () => {
    const [a, b] = await Promise.all([first, second].map(async (server) => (await fetch(`${server.base}/.well-known/jwks.json`)).json()))
    expect(a).toEqual(b)
  })
})
