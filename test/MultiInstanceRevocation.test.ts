/**
 * Revocation across instances (RFC 7009, docs/cache-coherence.md): a token revoked at one instance
 * is refused by the other's gateway and reported inactive by its introspection at the very next
 * request, while the same client's other token still works on both; with each client
 * authentication method. Two real `npm start` processes on one PostgreSQL database (needs
 * TEST_DATABASE_URL).
 */
import { describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { type ServerProcess, twoInstances } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"

const DATABASE_URL = process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const FORM = { "content-type": "application/x-www-form-urlencoded" }

describe.skipIf(DATABASE_URL === undefined)("revocation seen by a second instance on one PostgreSQL database", () => {
  const instances = twoInstances(() => ({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN }))

  const callService = (server: ServerProcess, path: string, token: string) =>
    fetch(`${server.base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}"
    }).then((response) => response.status)

  const introspect = (server: ServerProcess, token: string) =>
    fetch(`${server.base}/oauth/introspect`, {
      method: "POST",
      headers: { ...FORM, authorization: `Bearer ${ADMIN_TOKEN}` },
      body: new URLSearchParams({ token })
    }).then((response) => response.json() as Promise<{ active: boolean }>)

  for (const method of ["client_secret_post", "client_secret_basic"] as const) {
    it(`a token revoked at one instance (${method}) is refused by the other at its next request`, async () => {
      const profile = `revoke-${randomBytes(6).toString("hex")}`
      await adminJson(instances.first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}`)
      await adminJson(instances.first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}/environments/prod`)
      const service = await adminJson(instances.first.base, ADMIN_TOKEN, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
        name: "billing",
        auth_type: "oauth"
      })
      const credential = await adminJson(
        instances.first.base,
        ADMIN_TOKEN,
        "POST",
        `/admin/profiles/${profile}/environments/prod/services/${service.uuid}/credentials`
      )
      const issue = async () => {
        const response = await fetch(`${instances.first.base}/oauth/token`, {
          method: "POST",
          headers: FORM,
          body: new URLSearchParams({
            grant_type: "client_credentials",
            client_id: credential.client_id,
            client_secret: credential.client_secret,
            profile,
            environment: "prod",
            service_uuid: service.uuid
          })
        })
        expect(response.status).toBe(200)
        return ((await response.json()) as { access_token: string }).access_token
      }
      const [token, other] = [await issue(), await issue()]
      const path = `/service/${profile}/prod/json/${service.uuid}`

      // Both instances have the route cached, and accept the token.
      for (const server of [instances.first, instances.second]) {
        expect(await callService(server, path, token)).toBe(200)
        expect((await introspect(server, token)).active).toBe(true)
      }

      const basic = `Basic ${Buffer.from(`${credential.client_id}:${credential.client_secret}`).toString("base64")}`
      const revoked = await fetch(`${instances.first.base}/oauth/revoke`, {
        method: "POST",
        headers: method === "client_secret_basic" ? { ...FORM, authorization: basic } : FORM,
        body: new URLSearchParams(
          method === "client_secret_basic"
            ? { token }
            : { token, client_id: credential.client_id, client_secret: credential.client_secret }
        )
      })
      expect(revoked.status).toBe(200)
      expect(await revoked.text()).toBe("")
      expect(revoked.headers.get("cache-control")).toBe("no-store")

      // The very next request on the other instance refuses it; the other token still works.
      expect(await callService(instances.second, path, token)).toBe(401)
      expect(await introspect(instances.second, token)).toEqual({ active: false })
      expect(await callService(instances.first, path, token)).toBe(401)
      expect(await introspect(instances.first, token)).toEqual({ active: false })
      for (const server of [instances.second, instances.first]) {
        expect(await callService(server, path, other)).toBe(200)
        expect((await introspect(server, other)).active).toBe(true)
      }
    })
  }

  it("an introspector token revoked at one instance is refused by the other's introspection at its next request", async () => {
    const profile = `introspector-${randomBytes(6).toString("hex")}`
    await adminJson(instances.first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}`)
    const name = `rs-${randomBytes(4).toString("hex")}`
    const created = await adminJson(instances.first.base, ADMIN_TOKEN, "POST", "/admin/tokens", {
      name,
      role: "introspector",
      profiles: [profile]
    })
    const ask = (server: ServerProcess) =>
      fetch(`${server.base}/oauth/introspect`, {
        method: "POST",
        headers: { ...FORM, authorization: `Bearer ${created.token}` },
        body: new URLSearchParams({ token: "not-a-token" })
      }).then((response) => response.status)
    // Both instances know the caller now (and remember it).
    for (const server of [instances.first, instances.second, instances.second]) expect(await ask(server)).toBe(200)
    await adminJson(instances.first.base, ADMIN_TOKEN, "DELETE", `/admin/tokens/${name}`)
    expect(await ask(instances.second)).toBe(401)
    expect(await ask(instances.first)).toBe(401)
  })
})
