/**
 * `export` and `import` carry the trusted issuers of workload identity federation: a federated
 * credential moved into a fresh database gets a token there for its workload's token, nothing
 * registered by hand; a file from before the table imports with none; on a merge, an issuer of the
 * same name with another URL or setting is a conflict, and its times are not compared. The built CLI
 * and servers on fresh PostgreSQL databases (needs TEST_DATABASE_URL), a workload issuer on loopback.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import { describeWithPostgres, freshDatabase } from "./support/Databases.js"
import { admin, ADMIN_TOKEN, adminCall, expectRefusal, runCli, start, TRANSFER_TEST_DEADLINE_MS } from "./support/TransferRun.js"
import type { ServerProcess } from "./support/ServerProcess.js"
import { githubClaims, startWorkloadIssuer, type WorkloadIssuer } from "./support/WorkloadIssuer.js"

const AUDIENCE = "https://auth.test"
const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

describeWithPostgres("export and import carry the trusted issuers", () => {
  const work = mkdtempSync(join(tmpdir(), "service-auth-transfer-issuers-"))
  const drops: Array<() => Promise<void>> = []
  const createDatabase = async () => {
    const made = await freshDatabase()
    drops.push(made.drop)
    return made.url
  }
  let workload: WorkloadIssuer
  let issuers: Array<{ name: string; created_at: string }> = []
  let client = { profile: "", uuid: "", clientId: "" }
  const file = join(work, "issuers.json")

  const federatedToken = async (server: ServerProcess) => {
    const assertion = await workload.sign(githubClaims(Math.floor(Date.now() / 1000), AUDIENCE))
    return fetch(`${server.base}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: client.clientId,
        client_assertion_type: JWT_BEARER,
        client_assertion: assertion,
        profile: client.profile,
        environment: "production",
        service_uuid: client.uuid
      })
    })
  }

  beforeAll(async () => {
    workload = await startWorkloadIssuer()
    const source = await createDatabase()
    const server = await start({ ADMIN_TOKEN, DATABASE_URL: source })
    try {
      const profile = `fed-${randomBytes(4).toString("hex")}`
      expect((await adminCall(server, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
      expect((await adminCall(server, "PUT", `/admin/profiles/${profile}/environments/production`)).status).toBe(201)
      const service = await adminCall(server, "POST", `/admin/profiles/${profile}/environments/production/services`, {
        name: "billing",
        auth_type: "oauth"
      })
      // One issuer found through discovery, one with its keys inline and every setting given.
      const github = await adminCall(server, "PUT", "/admin/trusted-issuers/github", {
        issuer: workload.url,
        profiles: [profile],
        audience: AUDIENCE,
        allow_insecure_loopback: true
      })
      expect(github.status).toBe(201)
      const cluster = await adminCall(server, "PUT", "/admin/trusted-issuers/cluster", {
        issuer: "https://oidc.cluster.example.com",
        jwks: workload.jwks(),
        profiles: [profile, "globex"],
        audience: "https://auth.example.com",
        algorithms: ["RS256"],
        max_token_lifetime_seconds: 600
      })
      expect(cluster.status).toBe(201)
      const credential = await adminCall(
        server,
        "POST",
        `/admin/profiles/${profile}/environments/production/services/${service.body.uuid}/federated-credentials`,
        { issuer: "github", subject: "repo:acme/billing:environment:production", claims: { repository: "acme/billing" } }
      )
      expect(credential.status).toBe(201)
      client = { profile, uuid: service.body.uuid, clientId: credential.body.client_id }
      expect((await federatedToken(server)).status).toBe(200)
      issuers = (await adminCall(server, "GET", "/admin/trusted-issuers")).body.issuers
      expect(issuers.map((issuer) => issuer.name)).toEqual(["cluster", "github"])
    } finally {
      expect(await server.stop()).toBe(0)
    }
    const exported = await runCli(["export", "--out", file], { DATABASE_URL: source })
    expect(exported.stderr).toBe("")
    expect(exported.code).toBe(0)
    expect(exported.stdout).toMatch(/ audit events, 2 trusted issuers from PostgreSQL at /)
  }, TRANSFER_TEST_DEADLINE_MS)

  afterAll(async () => {
    await workload?.close()
    await Promise.all(drops.map((drop) => drop()))
    rmSync(work, { recursive: true, force: true })
  })

  it("a federated credential gets a token on the target, its issuers registered by the import alone", async () => {
    const document = JSON.parse(readFileSync(file, "utf8"))
    expect(Object.keys(document.tables)).toContain("trusted_issuers")
    expect(document.tables.trusted_issuers.map((row: { name: string }) => row.name)).toEqual(["cluster", "github"])
    expect(Object.keys(document.tables.trusted_issuers[0]).sort()).toEqual(["created_at", "issuer", "name", "settings", "updated_at"])
    expect(document.tables.trusted_issuers[0].settings).toEqual({
      jwks: workload.jwks(),
      audience: "https://auth.example.com",
      algorithms: ["RS256"],
      max_token_lifetime_seconds: 600,
      profiles: [client.profile, "globex"].sort(),
      allow_insecure_loopback: false
    })

    const target = await createDatabase()
    const imported = await runCli(["import", "--in", file, "--json"], { DATABASE_URL: target })
    expect(imported.stderr).toBe("")
    expect(imported.code).toBe(0)
    expect(JSON.parse(imported.stdout)).toMatchObject({ mode: "replace", file: { trusted_issuers: 2 }, added: { trusted_issuers: 2 } })
    const server = await start({ ADMIN_TOKEN, DATABASE_URL: target })
    try {
      expect((await adminCall(server, "GET", "/admin/trusted-issuers")).body.issuers).toEqual(issuers)
      const granted = await federatedToken(server)
      expect(granted.status, await granted.clone().text()).toBe(200)
      expect(((await granted.json()) as { token_type: string }).token_type).toBe("Bearer")
    } finally {
      expect(await server.stop()).toBe(0)
    }

    // A file written before the table existed imports, with no issuer (its credentials wait for one).
    const older = join(work, "older.json")
    delete document.tables.trusted_issuers
    writeFileSync(older, JSON.stringify(document), { mode: 0o600 })
    const olderTarget = await createDatabase()
    const olderImport = await runCli(["import", "--in", older], { DATABASE_URL: olderTarget })
    expect(olderImport.stderr).toBe("")
    expect(olderImport.stdout).not.toContain("trusted issuer")
    const rows = await admin((pg) => pg.query(`SELECT count(*)::int AS n FROM trusted_issuers`), olderTarget)
    expect(rows.rows[0].n).toBe(0)
  }, TRANSFER_TEST_DEADLINE_MS)

  it("--merge: the same issuers are present (whatever their times), another setting is a conflict, a bad row is refused", async () => {
    const url = await createDatabase()
    expect((await runCli(["import", "--in", file], { DATABASE_URL: url })).code).toBe(0)
    const original = JSON.parse(readFileSync(file, "utf8"))
    const variant = (name: string, change: (document: any) => void) => {
      const document = structuredClone(original)
      change(document)
      const path = join(work, `${name}.json`)
      writeFileSync(path, JSON.stringify(document), { mode: 0o600 })
      return path
    }
    const stored = () => admin((pg) => pg.query(`SELECT name, issuer, settings FROM trusted_issuers ORDER BY name`), url)
    const before = (await stored()).rows

    // Registered again by hand on the target at another time, alike: present, not a conflict.
    const retimed = variant("retimed", (d) => {
      for (const row of d.tables.trusted_issuers) row.created_at = row.updated_at = "2026-01-01T00:00:00.000000Z"
    })
    const same = await runCli(["import", "--in", retimed, "--merge"], { DATABASE_URL: url })
    expect(same.stderr).toBe("")
    expect(same.stdout).toMatch(/: added 0 profiles, .*, 0 audit events; \d+ already present\n$/)

    const grown = variant("grown", (d) => {
      d.tables.trusted_issuers.push({ ...d.tables.trusted_issuers[1], name: "github-staging", issuer: `${workload.url}/staging` })
    })
    const merged = await runCli(["import", "--in", grown, "--merge"], { DATABASE_URL: url })
    expect(merged.stderr).toBe("")
    expect(merged.stdout).toMatch(/, 0 audit events, 1 trusted issuer; \d+ already present\n$/)
    expect((await stored()).rows.map((row) => row.name)).toEqual(["cluster", "github", "github-staging"])

    const refusals: ReadonlyArray<[string, (document: any) => void, RegExp]> = [
      [
        "audience",
        (d) => void (d.tables.trusted_issuers[0].settings.audience = "https://elsewhere.example.com"),
        /^service-auth import: trusted issuer cluster exists in the target with another audience \(a conflict\); nothing was imported$/
      ],
      [
        "url",
        (d) => {
          d.tables.trusted_issuers[0].issuer = "https://oidc.other.example.com"
          d.tables.trusted_issuers[0].settings.profiles = ["acme"]
        },
        /^service-auth import: trusted issuer cluster exists in the target with another issuer, profiles \(a conflict\); nothing was imported$/
      ],
      [
        "plain-http",
        (d) => void (d.tables.trusted_issuers[0].issuer = "http://oidc.cluster.example.com"),
        /^service-auth import: .*: tables\.trusted_issuers\[0\]\.issuer: issuer must be an https: URL .*; nothing was imported$/
      ],
      [
        "twice",
        (d) => d.tables.trusted_issuers.push(d.tables.trusted_issuers[0]),
        /^service-auth import: .*: tables: trusted issuer cluster is listed twice; nothing was imported$/
      ],
      [
        "unknown-setting",
        (d) => void (d.tables.trusted_issuers[0].settings.refresh = 60),
        /^service-auth import: .*: tables\.trusted_issuers\[0\]\.settings\.refresh: is not a field of this format; nothing was imported$/
      ],
      [
        "private-key",
        (d) => void (d.tables.trusted_issuers[0].settings.jwks.keys[0].d = "AAAA"),
        /^service-auth import: .*: tables\.trusted_issuers\[0\]\.settings\.jwks\.keys\[0\]: must be a public key the admin API accepts; nothing was imported$/
      ]
    ]
    for (const [name, change, pattern] of refusals) {
      const refused = await runCli(["import", "--in", variant(name, change), "--merge"], { DATABASE_URL: url })
      expectRefusal(refused, pattern)
      expect(refused.stderr).not.toContain("AAAA")
    }
    expect((await stored()).rows.slice(0, 2)).toEqual(before)
  }, TRANSFER_TEST_DEADLINE_MS)
})
