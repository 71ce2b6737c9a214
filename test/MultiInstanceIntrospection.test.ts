/**
 * Two real `npm start` processes on one PostgreSQL database (needs TEST_DATABASE_URL) answer
 * introspection as one server: a seeded random walk creates credentials (some expiring within
 * seconds), issues tokens, and on either instance revokes tokens and deletes credentials, lets real
 * time pass; then, for every token, on both instances, a resource server's credential allowed to
 * introspect the profile (client_secret_basic) and an admin token get the same answer, and it is
 * `active` exactly when that instance's gateway accepts the token. `PROPERTY_SEED` replays a run.
 */
import { describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { type ServerProcess, twoInstances } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"
import { randomOf } from "./support/SeededRandom.js"

const DATABASE_URL = process.env.TEST_DATABASE_URL
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const FORM = { "content-type": "application/x-www-form-urlencoded" }
const RUNS = 5

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const basicOf = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`

interface Credential {
  readonly clientId: string
  readonly clientSecret: string
  /** Epoch ms; undefined: never. */
  readonly expiresAt: number | undefined
}

describe.skipIf(DATABASE_URL === undefined)("introspection agrees across two instances on one PostgreSQL database", () => {
  const instances = twoInstances(() => ({ DATABASE_URL: DATABASE_URL!, ADMIN_TOKEN }))
  const both = () => [instances.first, instances.second] as const

  const admin = (server: ServerProcess, method: string, path: string, body?: unknown) =>
    adminJson(server.base, ADMIN_TOKEN, method, path, body)

  const introspect = (server: ServerProcess, token: string, authorization: string) =>
    fetch(`${server.base}/oauth/introspect`, { method: "POST", headers: { ...FORM, authorization }, body: new URLSearchParams({ token }) })
      .then(async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }))

  const gatewayAccepts = (server: ServerProcess, path: string, token: string) =>
    fetch(`${server.base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}"
    }).then(async (response) => {
      await response.text()
      expect([200, 401]).toContain(response.status)
      return response.status === 200
    })

  const walk = async (random: () => number, seed: number) => {
    const pick = <A>(items: ReadonlyArray<A>) => items[Math.floor(random() * items.length)]!
    const server = () => pick(both())
    const profile = `mi-${randomBytes(6).toString("hex")}`
    await admin(server(), "PUT", `/admin/profiles/${profile}`)
    await admin(server(), "PUT", `/admin/profiles/${profile}/environments/prod`)
    const servicePath = async () => {
      const service = await admin(server(), "POST", `/admin/profiles/${profile}/environments/prod/services`, {
        name: "billing",
        auth_type: "oauth"
      })
      return { uuid: service.uuid as string, path: `/admin/profiles/${profile}/environments/prod/services/${service.uuid}` }
    }
    // The resource server: a credential of its own service, allowed by an admin on either instance.
    const rsService = await servicePath()
    const rs = await admin(server(), "POST", `${rsService.path}/credentials`)
    await admin(server(), "PUT", `${rsService.path}/credentials/${rs.client_id}/introspect_profiles`, { introspect_profiles: [profile] })
    const rsAuthorization = basicOf(rs.client_id, rs.client_secret)

    const service = await servicePath()
    const callPath = `/service/${profile}/prod/json/${service.uuid}`
    const credentials: Array<Credential> = []
    const tokens: Array<{ readonly credential: Credential; readonly accessToken: string }> = []
    for (let i = 0; i < 1 + Math.floor(random() * 2); i++) {
      const expiresAt = random() < 0.5 ? undefined : Date.now() + 1_500 + Math.floor(random() * 2_500)
      const created = await admin(
        server(),
        "POST",
        `${service.path}/credentials`,
        expiresAt === undefined ? {} : {
          // Whole seconds ahead, as the API takes them.
          expires_at: new Date(Math.ceil(expiresAt / 1000) * 1000).toISOString()
        }
      )
      const credential = {
        clientId: created.client_id as string,
        clientSecret: created.client_secret as string,
        expiresAt: expiresAt === undefined ? undefined : Math.ceil(expiresAt / 1000) * 1000
      }
      credentials.push(credential)
      for (let j = 0; j < 1 + Math.floor(random() * 2); j++) {
        const response = await fetch(`${server().base}/oauth/token`, {
          method: "POST",
          headers: FORM,
          body: new URLSearchParams({
            grant_type: "client_credentials",
            client_id: credential.clientId,
            client_secret: credential.clientSecret,
            profile,
            environment: "prod",
            service_uuid: service.uuid
          })
        })
        expect(response.status, `seed ${seed}`).toBe(200)
        tokens.push({ credential, accessToken: ((await response.json()) as { access_token: string }).access_token })
      }
    }

    for (let step = 0; step < 1 + Math.floor(random() * 3); step++) {
      const action = random()
      if (action < 0.35) await sleep(Math.floor(random() * 1_500))
      else if (action < 0.6) {
        const credential = pick(credentials)
        await fetch(`${server().base}${service.path}/credentials/${credential.clientId}`, {
          method: "DELETE",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
        }).then((response) => response.text())
      } else {
        const token = pick(tokens)
        await fetch(`${server().base}/oauth/revoke`, {
          method: "POST",
          headers: { ...FORM, authorization: basicOf(token.credential.clientId, token.credential.clientSecret) },
          body: new URLSearchParams({ token: token.accessToken })
        }).then((response) => response.text())
      }
    }
    // Never compare within a moment of an expiry: the instances read one clock, not at one instant.
    const now = Date.now()
    const near = credentials.map((c) => c.expiresAt).filter((at): at is number => at !== undefined && at > now - 300 && at < now + 2_000)
    if (near.length > 0) await sleep(Math.max(...near) + 300 - now)

    let active = 0
    for (const token of tokens) {
      const label = `seed ${seed}: token of ${token.credential.clientId}`
      const answers = []
      for (const instance of both()) {
        const byClient = await introspect(instance, token.accessToken, rsAuthorization)
        const byAdmin = await introspect(instance, token.accessToken, `Bearer ${ADMIN_TOKEN}`)
        expect(byClient.status, label).toBe(200)
        expect(byClient.body, label).toEqual(byAdmin.body)
        expect(byClient.body.active, label).toBe(await gatewayAccepts(instance, callPath, token.accessToken))
        answers.push(byClient.body)
      }
      expect(answers[1], label).toEqual(answers[0])
      if (answers[0]!.active === true) active++
    }
    return { tokens: tokens.length, active }
  }

  it("a resource server's introspection, the admin's and the gateway's agree on both instances", async () => {
    const base = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000)
    const seen = { tokens: 0, active: 0 }
    for (let run = 0; run < RUNS; run++) {
      const counts = await walk(randomOf(base + run), base + run)
      seen.tokens += counts.tokens
      seen.active += counts.active
    }
    expect(seen.active, `seeds ${base}..${base + RUNS - 1}`).toBeGreaterThan(0)
  }, 120_000)

  it("revoked, deleted and expired on one instance: inactive for the allowed credential on the other at once", async () => {
    const profile = `mi-${randomBytes(6).toString("hex")}`
    const [one, other] = both()
    await admin(one, "PUT", `/admin/profiles/${profile}`)
    await admin(one, "PUT", `/admin/profiles/${profile}/environments/prod`)
    const service = await admin(one, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    const path = `/admin/profiles/${profile}/environments/prod/services/${service.uuid}`
    const rsService = await admin(one, "POST", `/admin/profiles/${profile}/environments/prod/services`, { name: "rs", auth_type: "oauth" })
    const rsPath = `/admin/profiles/${profile}/environments/prod/services/${rsService.uuid}`
    const rs = await admin(one, "POST", `${rsPath}/credentials`)
    const rsAuthorization = basicOf(rs.client_id, rs.client_secret)
    // Not allowed yet: 403 on both; allowed on one instance: answered on the other at once.
    expect((await introspect(other, "not-a-token", rsAuthorization)).status).toBe(403)
    await admin(one, "PUT", `${rsPath}/credentials/${rs.client_id}/introspect_profiles`, { introspect_profiles: [profile] })
    expect((await introspect(other, "not-a-token", rsAuthorization)).body).toEqual({ active: false })

    const expiresAt = new Date(Math.ceil((Date.now() + 2_000) / 1000) * 1000)
    const credential = await admin(one, "POST", `${path}/credentials`, { expires_at: expiresAt.toISOString() })
    const spare = await admin(one, "POST", `${path}/credentials`)
    const issue = async (c: { client_id: string; client_secret: string }) => {
      const response = await fetch(`${one.base}/oauth/token`, {
        method: "POST",
        headers: { ...FORM, authorization: basicOf(c.client_id, c.client_secret) },
        body: new URLSearchParams({ grant_type: "client_credentials", profile, environment: "prod", service_uuid: service.uuid })
      })
      return ((await response.json()) as { access_token: string }).access_token
    }
    const [expiring, revoked, deleted] = [await issue(credential), await issue(spare), await issue(spare)]
    for (const token of [expiring, revoked, deleted]) expect((await introspect(other, token, rsAuthorization)).body.active).toBe(true)

    await fetch(`${one.base}/oauth/revoke`, {
      method: "POST",
      headers: { ...FORM, authorization: basicOf(spare.client_id, spare.client_secret) },
      body: new URLSearchParams({ token: revoked })
    }).then((response) => expect(response.status).toBe(200))
    expect((await introspect(other, revoked, rsAuthorization)).body).toEqual({ active: false })
    expect((await introspect(other, deleted, rsAuthorization)).body.active).toBe(true)
    expect(await admin(one, "DELETE", `${path}/credentials/${spare.client_id}`)).toBeUndefined()
    expect((await introspect(other, deleted, rsAuthorization)).body).toEqual({ active: false })

    await sleep(expiresAt.getTime() + 300 - Date.now())
    expect((await introspect(other, expiring, rsAuthorization)).body).toEqual({ active: false })
    // The resource server's own credential deleted on one instance: 401 on the other at once.
    await admin(one, "DELETE", `${rsPath}/credentials/${rs.client_id}`)
    expect((await introspect(other, "not-a-token", rsAuthorization)).status).toBe(401)
  }, 60_000)
})
