/**
 * Trusted issuers on two instances sharing PostgreSQL: a federated client gets tokens on both, and
 * an issuer changed on one (no longer allowed for the profile) is refused by the other at its next
 * request, then accepted again once allowed. Two real `npm start` processes on a database of their
 * own, and an issuer on loopback that signs like a Kubernetes cluster.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { adminFetch } from "./support/AdminFetch.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { kubernetesClaims, startWorkloadIssuer, type WorkloadIssuer } from "./support/WorkloadIssuer.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const AUDIENCE = "service-auth-federation-test"

describe.skipIf(TEST_DATABASE_URL === undefined)("trusted issuers on two instances of one PostgreSQL database", () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>
  let first: ServerProcess
  let second: ServerProcess
  let cluster: WorkloadIssuer

  beforeAll(async () => {
    database = await freshDatabase()
    cluster = await startWorkloadIssuer({ path: "cluster" })
    const env = { DATABASE_URL: database.url, ADMIN_TOKEN }
    ;[first, second] = await Promise.all([startServer(env), startServer(env)])
  }, 120_000)

  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()])
    await cluster?.close()
    await database?.drop()
  })

  it("an issuer changed on one instance is seen by the other at its next token request", async () => {
    const profile = `fed-${randomBytes(4).toString("hex")}`
    expect((await adminFetch(first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await adminFetch(first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await adminFetch(first.base, ADMIN_TOKEN, "POST", `/admin/profiles/${profile}/environments/prod/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    const issuerBody = (profiles: ReadonlyArray<string>) => ({
      issuer: cluster.url,
      audience: AUDIENCE,
      profiles,
      allow_insecure_loopback: true
    })
    expect((await adminFetch(first.base, ADMIN_TOKEN, "PUT", "/admin/trusted-issuers/cluster", issuerBody([profile]))).status).toBe(201)
    const credential = await adminFetch(
      second.base,
      ADMIN_TOKEN,
      "POST",
      `/admin/profiles/${profile}/environments/prod/services/${service.body.uuid}/federated-credentials`,
      { issuer: "cluster", subject: "system:serviceaccount:payments:billing" }
    )
    expect(credential.status).toBe(201)
    const workload = await cluster.sign(kubernetesClaims(Math.floor(Date.now() / 1000), AUDIENCE))
    const token = (server: ServerProcess) =>
      fetch(`${server.base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          profile,
          environment: "prod",
          service_uuid: service.body.uuid,
          client_id: credential.body.client_id,
          client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
          client_assertion: workload
        })
      }).then(async (response) => ({ status: response.status, body: await response.json() }))

    for (const server of [first, second]) expect((await token(server)).status).toBe(200)
    expect((await adminFetch(second.base, ADMIN_TOKEN, "PUT", "/admin/trusted-issuers/cluster", issuerBody(["elsewhere"]))).status)
      .toBe(200)
    for (const server of [first, second]) {
      const refused = await token(server)
      expect(refused.status).toBe(401)
      expect(refused.body.error).toBe("invalid_client")
    }
    expect((await adminFetch(first.base, ADMIN_TOKEN, "PUT", "/admin/trusted-issuers/cluster", issuerBody([profile]))).status).toBe(200)
    for (const server of [second, first]) expect((await token(server)).status).toBe(200)
  })
})
