/**
 * `service-auth export` and `import` (docs/operators.md), through the real processes: a server on
 * an embedded data directory makes a credential and a token, `node dist/cli.mjs export` writes the
 * file, `import` loads it into a fresh PostgreSQL database, and a server there accepts both. Then
 * the refusals: a database in use, a file that exists, a target that is not empty, a conflicting
 * merge, a corrupt file; and a test that fails when a table of the schema is neither exported nor
 * declared transient. The source has rotated its signing key (tokens of both keys must survive the
 * move, with the same schedule) and has an audit trail; a second source seals its keys with
 * KEY_ENCRYPTION_KEY. Needs TEST_DATABASE_URL (each test makes its own databases).
 */
import { expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { execFile } from "node:child_process"
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { afterAll, beforeAll } from "vitest"
import { seal } from "../src/keys/KeyEncryption.js"
import * as Storage from "../src/storage/Storage.js"
import { TRANSIENT_TABLES, unclassifiedSchema } from "../src/transfer/DatabaseSchema.js"
import { describeWithPostgres, TEST_DATABASE_URL } from "./support/Databases.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminFetch } from "./support/AdminFetch.js"

const CLI = fileURLToPath(new URL("../dist/cli.mjs", import.meta.url))
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `node dist/cli.mjs ...args` with only the storage settings given here. */
const runCli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  new Promise<CliResult>((resolve) => {
    const { DATABASE_URL: _url, DATA_DIR: _dir, ...inherited } = process.env
    execFile(process.execPath, [CLI, ...args], { env: { ...inherited, ...env }, timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
  })

/** A fresh database on the test server, dropped by `dropDatabases`. */
const databases: Array<string> = []
const admin = async <A>(use: (client: pg.Client) => Promise<A>, url = TEST_DATABASE_URL!) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}
const createDatabase = async () => {
  const name = `sa_transfer_${randomBytes(6).toString("hex")}`
  await admin((client) => client.query(`CREATE DATABASE ${name}`))
  databases.push(name)
  const url = new URL(TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  return url.toString()
}
const dropDatabases = () =>
  Promise.all(databases.map((name) => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))))

/** What an import must leave alone when it refuses: catalogue, keys, and the change counter. */
const snapshot = (url: string) =>
  admin(async (client) => {
    const exists = (await client.query(`SELECT to_regclass('profiles') IS NOT NULL AS migrated`)).rows[0].migrated
    if (!exists) return "not migrated"
    const { rows } = await client.query(`
      SELECT (SELECT json_agg(p ORDER BY profile) FROM profiles p) AS profiles,
             (SELECT json_agg(s ORDER BY uuid) FROM services s) AS services,
             (SELECT json_agg(c ORDER BY client_id) FROM credentials c) AS credentials,
             (SELECT md5(string_agg(name || value, ',' ORDER BY name)) FROM server_keys) AS keys,
             (SELECT json_agg(k ORDER BY position) FROM signing_keys k) AS signing_keys,
             (SELECT json_agg(e ORDER BY id) FROM audit_events e) AS audit_events,
             (SELECT version FROM catalogue_version) AS version`)
    return JSON.stringify(rows[0])
  }, url)

/** `startServer` (which starts once more when the first statements outlasted the storage timeout). */
const start = (env: Readonly<Record<string, string>>): Promise<ServerProcess> => startServer(env, { healthTimeoutMs: 120_000 })

const adminCall = (server: ServerProcess, method: string, path: string, body?: unknown) =>
  adminFetch(server.base, ADMIN_TOKEN, method, path, body)

interface Target {
  readonly profile: string
  readonly uuid: string
  readonly clientId: string
  readonly secret: string
}

const requestToken = (server: ServerProcess, target: Target) =>
  fetch(`${server.base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: target.clientId,
      client_secret: target.secret,
      profile: target.profile,
      environment: "production",
      service_uuid: target.uuid
    })
  })

const callService = (server: ServerProcess, target: Target, token: string) =>
  fetch(`${server.base}/service/${target.profile}/production/json/${target.uuid}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: `{"amount":42}`
  })

/** The kid in a token's header. */
const kidOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString("utf8")).kid as string

/** The secrets and keys no output may show. */
const expectNoSecret = (text: string, target: Target, token: string) => {
  expect(text).not.toContain(target.secret)
  expect(text).not.toContain(token)
  expect(text).not.toContain("PRIVATE KEY")
}

/** One line on stderr, nothing on stdout, exit 1. */
const expectRefusal = (result: CliResult, pattern: RegExp) => {
  expect(result.code).toBe(1)
  expect(result.stdout).toBe("")
  expect(result.stderr.trim().split("\n")).toHaveLength(1)
  expect(result.stderr.trim()).toMatch(pattern)
}

/**
 * A test's deadline: each starts servers and CLI processes on fresh embedded or PostgreSQL databases,
 * tens of seconds apiece when both cores are busy. A deadline for a hang, not a speed limit.
 */
const TRANSFER_TEST_DEADLINE_MS = 480_000

describeWithPostgres("export from the embedded database, import into PostgreSQL", () => {
  const work = mkdtempSync(join(tmpdir(), "service-auth-transfer-"))
  const dataDir = join(work, "data")
  const file = join(work, "export.json")
  let target: Target
  let spare: Target
  /** Signed by the first key, before the rotation; `rotatedToken` by the key that replaced it. */
  let token: string
  let rotatedToken: string
  /** `GET /admin/keys` and `GET /admin/audit` on the source, just before it stopped. */
  let sourceKeys: unknown
  let sourceAudit: unknown

  beforeAll(async () => {
    // No publication delay: the rotated key signs at once.
    const server = await start({ ADMIN_TOKEN, DATA_DIR: dataDir, KEY_PUBLISH_DELAY_S: "0" })
    try {
      const profile = `acme-${randomBytes(4).toString("hex")}`
      expect((await adminCall(server, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
      // The expiry and rate-limit columns move too: the profile's policy, the service's rate limit, a credential's expiry.
      expect((await adminCall(server, "PUT", `/admin/profiles/${profile}`, { credential_max_lifetime_days: 365 })).status).toBe(200)
      expect((await adminCall(server, "PUT", `/admin/profiles/${profile}/environments/production`)).status).toBe(201)
      const service = await adminCall(server, "POST", `/admin/profiles/${profile}/environments/production/services`, {
        name: "billing",
        auth_type: "oauth",
        rate_limit: { requests: 100, per_seconds: 60 }
      })
      const credentials = `/admin/profiles/${profile}/environments/production/services/${service.body.uuid}/credentials`
      const created = await adminCall(server, "POST", credentials)
      // A deleted credential: its tombstone moves too, so its client id is never reused.
      const deleted = await adminCall(server, "POST", credentials)
      expect((await adminCall(server, "DELETE", `${credentials}/${deleted.body.client_id}`)).status).toBe(204)
      const second = await adminCall(server, "POST", credentials)
      expect(second.status).toBe(201)
      target = { profile, uuid: service.body.uuid, clientId: created.body.client_id, secret: created.body.client_secret }
      spare = { ...target, clientId: second.body.client_id, secret: second.body.client_secret }
      const issued = await requestToken(server, target)
      expect(issued.status).toBe(200)
      token = ((await issued.json()) as { access_token: string }).access_token
      expect((await adminCall(server, "POST", "/admin/keys/rotate")).status).toBe(201)
      const reissued = await requestToken(server, target)
      expect(reissued.status).toBe(200)
      rotatedToken = ((await reissued.json()) as { access_token: string }).access_token
      expect(kidOf(rotatedToken)).not.toBe(kidOf(token))
      sourceKeys = (await adminCall(server, "GET", "/admin/keys")).body
      expect((sourceKeys as any).keys.map((k: any) => k.status)).toEqual(["active", "retiring"])
      sourceAudit = (await adminCall(server, "GET", "/admin/audit")).body
      expect((sourceAudit as any).events[0].action).toBe("key.rotated")
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  afterAll(async () => {
    await dropDatabases()
    rmSync(work, { recursive: true, force: true })
  }, 60_000)

  it("refuses to export while a server runs on the data directory", async () => {
    const server = await start({ ADMIN_TOKEN, DATA_DIR: dataDir })
    try {
      const result = await runCli(["export", "--out", file], { DATA_DIR: dataDir })
      expectRefusal(result, /^service-auth export: DATA_DIR .*: the data directory is in use by process \d+/)
      expect(existsSync(file)).toBe(false)
      // The server was not disturbed.
      expect((await requestToken(server, target)).status).toBe(200)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it("exports to a file of mode 0600 that holds digests and keys, never a secret", async () => {
    const result = await runCli(["export", "--out", file], { DATA_DIR: dataDir })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(result.stdout).toBe(
      `exported 1 profile, 1 environment, 1 service, 3 credentials (1 deleted), 3 keys (2 signing), 9 audit events from the embedded database in ${dataDir} to ${file}\n`
    )
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const text = readFileSync(file, "utf8")
    expect(text).not.toContain(target.secret)
    expect(text).not.toContain(spare.secret)
    const document = JSON.parse(text)
    expect(document).toMatchObject({ format: "service-auth-export", version: 3, schema_version: expect.any(Number) })
    expect(Object.keys(document.tables)).toEqual([
      "profiles",
      "environments",
      "services",
      "credentials",
      "server_keys",
      "signing_keys",
      "audit_events"
    ])
    expect(document.tables.credentials.map((c: { client_id: string }) => c.client_id)).toContain(target.clientId)
    // The generated key of earlier versions moved to signing_keys when the server started.
    expect(document.tables.server_keys.map((k: { name: string }) => k.name)).toEqual(["credential_digest_key"])
    // In the order they were added: the first key, then the rotated one.
    expect(document.tables.signing_keys.map((k: { kid: string }) => k.kid)).toEqual([kidOf(token), kidOf(rotatedToken)])
    expect(Object.keys(document.tables.signing_keys[0]).sort()).toEqual(["active_from", "created_at", "kid", "private_key", "public_jwk"])
    expect(document.tables.credentials[0].created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    expect(document.tables.profiles[0].credential_max_lifetime_days).toBe(365)
    expect(document.tables.services[0].rate_limit).toEqual({ requests: 100, per_seconds: 60 })
    expect(document.tables.credentials[0].expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    expect(document.tables.credentials[0].expiry_recorded).toBe(false)
    // Oldest first, without ids.
    expect(document.tables.audit_events.map((e: { action: string }) => e.action)).toEqual([
      "profile.created",
      "profile.changed",
      "environment.created",
      "service.created",
      "credential.added",
      "credential.added",
      "credential.removed",
      "credential.added",
      "key.rotated"
    ])
    expect(document.tables.audit_events[0]).not.toHaveProperty("id")
  }, TRANSFER_TEST_DEADLINE_MS)

  it("refuses to overwrite the file unless --force, and replaces it whole with --force", async () => {
    writeFileSync(file, "keep me", { mode: 0o644 })
    const refused = await runCli(["export", "--out", file], { DATA_DIR: dataDir })
    expectRefusal(refused, /^service-auth export: .*export\.json already exists; --force replaces it$/)
    expect(readFileSync(file, "utf8")).toBe("keep me")
    const forced = await runCli(["export", "--out", file, "--force", "--json"], { DATA_DIR: dataDir })
    expect(forced.code).toBe(0)
    expect(JSON.parse(forced.stdout)).toMatchObject({
      exported: { profiles: 1, credentials: 3, deleted_credentials: 1, keys: 3, signing_keys: 2, audit_events: 9 }
    })
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(JSON.parse(readFileSync(file, "utf8")).format).toBe("service-auth-export")
  }, TRANSFER_TEST_DEADLINE_MS)

  it(
    "imports into PostgreSQL: the credential made before the move gets a token, the tokens of both keys still work, keys and history are the same",
    async () => {
      const url = await createDatabase()
      const result = await runCli(["import", "--in", file], { DATABASE_URL: url })
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(result.stdout).toMatch(
        /^imported 1 profile, 1 environment, 1 service, 3 credentials \(1 deleted\), 3 keys \(2 signing\), 9 audit events into PostgreSQL at 127\.0\.0\.1:5432\/sa_transfer_\w+\n$/
      )
      // Exported back from PostgreSQL, the rows are the same, to the microsecond.
      const roundTrip = join(work, "round-trip.json")
      const exported = await runCli(["export", "--out", roundTrip, "--database-url", url])
      expect(exported.code).toBe(0)
      expect(JSON.parse(readFileSync(roundTrip, "utf8")).tables).toEqual(JSON.parse(readFileSync(file, "utf8")).tables)

      const server = await start({ ADMIN_TOKEN, DATABASE_URL: url })
      try {
        const issued = await requestToken(server, target)
        expect(issued.status).toBe(200)
        const fresh = ((await issued.json()) as { access_token: string }).access_token
        expect((await callService(server, target, fresh)).status).toBe(200)
        expect(kidOf(fresh)).toBe(kidOf(rotatedToken))
        const before = await callService(server, target, token)
        expect(before.status).toBe(200)
        expect(await before.json()).toMatchObject({ client_id: target.clientId, body: { amount: 42 } })
        expect((await callService(server, target, rotatedToken)).status).toBe(200)
        expect((await requestToken(server, spare)).status).toBe(200)
        // The same schedule: kids, statuses and every time.
        expect((await adminCall(server, "GET", "/admin/keys")).body).toEqual(sourceKeys)
        // The same history, newest first.
        expect((await adminCall(server, "GET", "/admin/audit")).body).toEqual(sourceAudit)
        // Order and content as the admin API shows them.
        const profile = await adminCall(server, "GET", `/admin/profiles/${target.profile}`)
        expect(profile.body.environments[0].services[0].credentials.map((c: { client_id: string }) => c.client_id)).toEqual([
          target.clientId,
          spare.clientId
        ])
      } finally {
        expect(await server.stop()).toBe(0)
      }

      // Now it is not empty: a second import refuses and changes nothing.
      const unchanged = await snapshot(url)
      const again = await runCli(["import", "--in", file], { DATABASE_URL: url })
      expectRefusal(
        again,
        /^service-auth import: the target database is not empty \(1 profile, 3 credentials\); --merge adds what is missing; nothing was imported$/
      )
      expect(await snapshot(url)).toBe(unchanged)
      expectNoSecret(result.stdout + result.stderr + again.stderr, target, token)
    },
    TRANSFER_TEST_DEADLINE_MS
  )

  it("a database where a server merely started counts as empty: its generated keys are replaced", async () => {
    const url = await createDatabase()
    const server = await start({ ADMIN_TOKEN, DATABASE_URL: url })
    await server.stop()
    const result = await runCli(["import", "--in", file, "--json"], { DATABASE_URL: url })
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({
      mode: "replace",
      added: { profiles: 1, credentials: 3, keys: 3, signing_keys: 2, audit_events: 9 },
      replaced_keys: ["signing_keys", "credential_digest_key"]
    })
    expect(result.stderr).toMatch(/were replaced by the file's: restart every server running on it/)
    const restarted = await start({ ADMIN_TOKEN, DATABASE_URL: url })
    try {
      expect((await callService(restarted, target, token)).status).toBe(200)
      expect((await callService(restarted, target, rotatedToken)).status).toBe(200)
      expect((await adminCall(restarted, "GET", "/admin/keys")).body).toEqual(sourceKeys)
      expect((await requestToken(restarted, target)).status).toBe(200)
    } finally {
      await restarted.stop()
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it("--merge adds what is missing, refuses a conflict, a foreign digest key and a third live credential", async () => {
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
    const hex = (bytes: number) => randomBytes(bytes).toString("hex")
    const foreignSigningKey = () => {
      const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
      const { n, e } = publicKey.export({ format: "jwk" })
      const kid = createHash("sha256").update(JSON.stringify({ e, kty: "RSA", n })).digest("base64url")
      return {
        kid,
        public_jwk: { kty: "RSA", n, e },
        private_key: privateKey.export({ type: "pkcs8", format: "pem" }),
        created_at: "2026-01-01T00:00:00.000000Z",
        active_from: "2026-01-01T00:00:00.000000Z"
      }
    }
    const credential = (uuid: string, profile = target.profile) => ({
      client_id: `svc_${hex(16)}`,
      profile,
      environment: "production",
      service_uuid: uuid,
      secret_hash: hex(32),
      created_at: "2026-01-01T00:00:00.000000Z",
      last_used_at: null,
      deleted_at: null
    })

    // The same file again: everything is already there.
    const same = await runCli(["import", "--in", file, "--merge"], { DATABASE_URL: url })
    expect(same.code).toBe(0)
    expect(same.stdout).toMatch(
      /^merged into PostgreSQL at .*: added 0 profiles, 0 environments, 0 services, 0 credentials \(0 deleted\), 0 keys \(0 signing\), 0 audit events; 18 already present\n$/
    )

    // A profile more, and the spare credential deleted at the source since: added, and deleted here too.
    const newUuid = "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10"
    const grown = variant("grown", (d) => {
      d.tables.profiles.push({ profile: "globex", created_at: "2026-01-01T00:00:00.000000Z" })
      d.tables.environments.push({ profile: "globex", name: "production", created_at: "2026-01-01T00:00:00.000000Z" })
      d.tables.services.push({
        profile: "globex",
        environment: "production",
        uuid: newUuid,
        name: "ledger",
        auth_type: "oauth",
        handler: { type: "echo" },
        created_at: "2026-01-01T00:00:00.000000Z"
      })
      d.tables.credentials.push(credential(newUuid, "globex"))
      d.tables.credentials.find((c: any) => c.client_id === spare.clientId).deleted_at = "2026-01-02T00:00:00.000000Z"
      // Its history since: appended after what the target holds.
      d.tables.audit_events.push({
        time: "2026-01-02T00:00:00.000000Z",
        actor: "admin",
        source: "127.0.0.1",
        action: "profile.created",
        profile: "globex",
        environment: null,
        service_uuid: null,
        client_id: null,
        details: null
      })
    })
    const merged = await runCli(["import", "--in", grown, "--merge"], { DATABASE_URL: url })
    expect(merged.stderr).toBe("")
    expect(merged.stdout).toMatch(
      /: added 1 profile, 1 environment, 1 service, 1 credential \(0 deleted\), 0 keys \(0 signing\), 1 audit event; 18 already present; 1 credentials deleted as in the file\n$/
    )
    const history = await admin((client) => client.query(`SELECT action, profile FROM audit_events ORDER BY id`), url)
    expect(history.rows).toHaveLength(10)
    expect(history.rows[9]).toEqual({ action: "profile.created", profile: "globex" })
    const rows = await admin((client) => client.query(`SELECT client_id, deleted_at FROM credentials`), url)
    expect(rows.rows.find((r) => r.client_id === spare.clientId).deleted_at).not.toBeNull()
    expect(rows.rows).toHaveLength(4)

    // The same keys stored another way (sealed with some KEY_ENCRYPTION_KEY): identical; the target keeps its form.
    const resealed = variant("resealed", (d) => {
      const someKey = randomBytes(32)
      for (const key of d.tables.signing_keys) key.private_key = seal(someKey, `signing_key:${key.kid}`, key.private_key)
    })
    const sameKeys = await runCli(["import", "--in", resealed, "--merge"], { DATABASE_URL: url })
    expect(sameKeys.stderr).toBe("")
    expect(sameKeys.stdout).toMatch(/: added 0 profiles, .*, 0 keys \(0 signing\), 0 audit events; 18 already present\n$/)
    const stored = await admin((client) => client.query(`SELECT private_key FROM signing_keys ORDER BY position`), url)
    expect(stored.rows.map((r) => r.private_key)).toEqual(original.tables.signing_keys.map((k: any) => k.private_key))

    const unchanged = await snapshot(url)
    const refusals: ReadonlyArray<[string, (document: any) => void, RegExp]> = [
      [
        "renamed",
        (d) => (d.tables.services[0].name = "invoicing"),
        /service .* exists in the target with another name \(a conflict\); nothing was imported$/
      ],
      [
        "older",
        (d) => (d.tables.profiles[0].created_at = "2020-01-01T00:00:00Z"),
        /profile .* exists in the target with another created_at/
      ],
      [
        "foreign-key",
        (d) => (d.tables.server_keys.find((k: any) => k.name === "credential_digest_key").value = randomBytes(32).toString("base64url")),
        /the target's credential digest key differs from the file's, and its live credentials depend on it: the imported credentials could never authenticate there; nothing was imported$/
      ],
      // Another schedule for the same keys, one key fewer, a key more: the target's tokens depend on its keys.
      [
        "rescheduled",
        (d) => (d.tables.signing_keys[1].active_from = "2030-01-01T00:00:00.000000Z"),
        /the target's signing keys differ from the file's \(key [\w-]{43} has another active_from\), and its live credentials' tokens depend on them: .*; nothing was imported$/
      ],
      [
        "fewer-keys",
        (d) => d.tables.signing_keys.pop(),
        /the target's signing keys differ from the file's \(only in the target: [\w-]{43}\)/
      ],
      [
        "foreign-signing-key",
        (d) => d.tables.signing_keys.push(foreignSigningKey()),
        /the target's signing keys differ from the file's \(only in the file: [\w-]{43}\)/
      ],
      // Two live credentials in the file (which no longer lists the first), one live in the target: three.
      ["crowded", (d) => {
        d.tables.credentials = d.tables.credentials.filter((c: any) => c.client_id !== target.clientId)
        d.tables.credentials.find((c: any) => c.client_id === spare.clientId).deleted_at = "2026-01-02T00:00:00.000000Z"
        d.tables.credentials.push(credential(target.uuid), credential(target.uuid))
      }, /service .* would have 3 live credentials, at most 2 are allowed; nothing was imported$/]
    ]
    for (const [name, change, pattern] of refusals) {
      const result = await runCli(["import", "--in", variant(name, change), "--merge"], { DATABASE_URL: url })
      expectRefusal(result, pattern)
      expect(await snapshot(url)).toBe(unchanged)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it("--merge into a database without live credentials replaces its keys: nothing depended on them", async () => {
    const url = await createDatabase()
    const foreign = join(work, "foreign.json")
    const signingKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" })
    const at = "2026-01-01T00:00:00.000000Z"
    writeFileSync(
      foreign,
      JSON.stringify({
        format: "service-auth-export",
        version: 1,
        exported_at: at,
        schema_version: 1,
        tables: {
          profiles: [{ profile: "initech", created_at: at }],
          environments: [],
          services: [],
          credentials: [],
          server_keys: [
            { name: "credential_digest_key", value: randomBytes(32).toString("base64url"), created_at: at },
            { name: "signing_key", value: signingKey, created_at: at }
          ]
        }
      }),
      { mode: 0o600 }
    )
    expect((await runCli(["import", "--in", foreign], { DATABASE_URL: url })).code).toBe(0)
    expectRefusal(await runCli(["import", "--in", file], { DATABASE_URL: url }), /not empty \(1 profile, 0 credentials\)/)
    const merged = await runCli(["import", "--in", file, "--merge", "--json"], { DATABASE_URL: url })
    expect(merged.code).toBe(0)
    // The version-1 file's key from before rotation was imported as it was (a server would adopt it at start);
    // the file's rotating keys replace it.
    expect(JSON.parse(merged.stdout)).toMatchObject({
      mode: "merge",
      added: { profiles: 1, credentials: 3, keys: 3, signing_keys: 2 },
      replaced_keys: ["credential_digest_key", "signing_key"]
    })
    expect(merged.stderr).toMatch(/were replaced by the file's: restart every server running on it/)
    const keys = await admin((client) => client.query(`SELECT name, value FROM server_keys ORDER BY name`), url)
    const exported = JSON.parse(readFileSync(file, "utf8")).tables
    expect(keys.rows).toEqual(exported.server_keys.map((k: any) => ({ name: k.name, value: k.value })))
    const signing = await admin((client) => client.query(`SELECT kid FROM signing_keys ORDER BY position`), url)
    expect(signing.rows.map((r) => r.kid)).toEqual(exported.signing_keys.map((k: any) => k.kid))
  }, TRANSFER_TEST_DEADLINE_MS)

  it("signing keys replaced under a running server: it uses the file's within 2 s, without a restart", async () => {
    const url = await createDatabase()
    const original = JSON.parse(readFileSync(file, "utf8"))
    // The same database before its credentials, with another signing key: nothing depends on that key.
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
    const { n, e } = publicKey.export({ format: "jwk" })
    const early = join(work, "early.json")
    writeFileSync(
      early,
      JSON.stringify({
        ...original,
        tables: {
          ...original.tables,
          credentials: [],
          signing_keys: [{
            kid: createHash("sha256").update(JSON.stringify({ e, kty: "RSA", n })).digest("base64url"),
            public_jwk: { kty: "RSA", n, e },
            private_key: privateKey.export({ type: "pkcs8", format: "pem" }),
            created_at: "2026-01-01T00:00:00.000000Z",
            active_from: "2026-01-01T00:00:00.000000Z"
          }],
          audit_events: []
        }
      }),
      { mode: 0o600 }
    )
    expect((await runCli(["import", "--in", early], { DATABASE_URL: url })).code).toBe(0)
    const server = await start({ ADMIN_TOKEN, DATABASE_URL: url })
    try {
      expect((await callService(server, target, token)).status).not.toBe(200)
      const merged = await runCli(["import", "--in", file, "--merge", "--json"], { DATABASE_URL: url })
      expect(merged.code).toBe(0)
      expect(JSON.parse(merged.stdout)).toMatchObject({ replaced_keys: ["signing_keys"], restart_needed: false })
      expect(merged.stderr).toMatch(
        /^service-auth import: the keys this database held \(signing_keys\) were replaced by the file's: servers running on it use the new signing keys within 2 seconds, without a restart/
      )
      // The periodic reload (every 2 s) brings the file's keys: new tokens are signed with the file's
      // active key within 2 s (polled, with a wide margin for a busy machine)...
      const issuedKid = async () => {
        const issued = await requestToken(server, target)
        expect(issued.status).toBe(200)
        return kidOf(((await issued.json()) as { access_token: string }).access_token)
      }
      const reloadedBy = Date.now() + 2_000 + 13_000
      let kid = await issuedKid()
      while (kid !== kidOf(rotatedToken) && Date.now() < reloadedBy) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        kid = await issuedKid()
      }
      expect(kid).toBe(kidOf(rotatedToken))
      // ...and a token naming one of them is accepted (it loads them at once anyway).
      expect((await callService(server, target, token)).status).toBe(200)
      expect((await callService(server, target, rotatedToken)).status).toBe(200)
      expect((await adminCall(server, "GET", "/admin/keys")).body).toEqual(sourceKeys)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it("a corrupt or foreign file is refused before the database is touched", async () => {
    const url = await createDatabase()
    const text = readFileSync(file, "utf8")
    const document = JSON.parse(text)
    const badPem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    const cases: ReadonlyArray<[string, string, RegExp]> = [
      ["truncated", text.slice(0, text.length / 2), /: not JSON \(.*\); nothing was imported$/],
      ["not an export", JSON.stringify({ hello: "world" }), /: not a service-auth export \("format" is not "service-auth-export"\)/],
      [
        "another version",
        JSON.stringify({ ...document, version: 4 }),
        /: export format version 4 is not one this service-auth reads \(1, 2, 3\)/
      ],
      [
        "a missing field",
        JSON.stringify({
          ...document,
          tables: { ...document.tables, credentials: [{ ...document.tables.credentials[0], secret_hash: undefined }] }
        }),
        /: tables\.credentials\[0\]\.secret_hash: is missing; nothing was imported$/
      ],
      [
        "an unknown table",
        JSON.stringify({ ...document, tables: { ...document.tables, audit: [] } }),
        /: tables\.audit: is not a field of this format/
      ],
      [
        "a bad key",
        JSON.stringify({
          ...document,
          tables: {
            ...document.tables,
            server_keys: [...document.tables.server_keys, { name: "signing_key", value: badPem, created_at: document.exported_at }]
          }
        }),
        /: the file's signing key is not usable/
      ],
      [
        "a bad signing key",
        JSON.stringify({
          ...document,
          tables: {
            ...document.tables,
            signing_keys: [{ ...document.tables.signing_keys[0], private_key: badPem }, document.tables.signing_keys[1]]
          }
        }),
        /: tables\.signing_keys\[0\]: private_key is not usable \(.*\); nothing was imported$/
      ],
      [
        "a swapped signing key",
        JSON.stringify({
          ...document,
          tables: {
            ...document.tables,
            signing_keys: [
              { ...document.tables.signing_keys[0], private_key: document.tables.signing_keys[1].private_key },
              document.tables.signing_keys[1]
            ]
          }
        }),
        /: tables\.signing_keys\[0\]: private_key is not the private half of public_jwk; nothing was imported$/
      ],
      [
        "a kid that is not the thumbprint",
        JSON.stringify({
          ...document,
          tables: { ...document.tables, signing_keys: [{ ...document.tables.signing_keys[0], kid: document.tables.signing_keys[1].kid }] }
        }),
        /: tables\.signing_keys\[0\]: kid is not the RFC 7638 thumbprint of public_jwk; nothing was imported$/
      ],
      [
        "a duplicate kid",
        JSON.stringify({
          ...document,
          tables: { ...document.tables, signing_keys: [document.tables.signing_keys[0], document.tables.signing_keys[0]] }
        }),
        /: tables: signing key [\w-]{43} is listed twice; nothing was imported$/
      ],
      [
        "a private JWK",
        JSON.stringify({
          ...document,
          tables: {
            ...document.tables,
            signing_keys: [{ ...document.tables.signing_keys[0], public_jwk: { ...document.tables.signing_keys[0].public_jwk, d: "AAAA" } }]
          }
        }),
        /: tables\.signing_keys\[0\]\.public_jwk\.d: is not a field of this format/
      ],
      [
        "an unknown action",
        JSON.stringify({
          ...document,
          tables: { ...document.tables, audit_events: [{ ...document.tables.audit_events[0], action: "profile.renamed" }] }
        }),
        /: tables\.audit_events\[0\]\.action: Expected /
      ],
      [
        "an orphan",
        JSON.stringify({ ...document, tables: { ...document.tables, profiles: [] } }),
        /: tables: environment .*: its profile is not in the file; nothing was imported$/
      ]
    ]
    for (const [label, content, pattern] of cases) {
      const path = join(work, `corrupt-${label.replaceAll(" ", "-")}.json`)
      writeFileSync(path, content, { mode: 0o600 })
      const result = await runCli(["import", "--in", path], { DATABASE_URL: url })
      expectRefusal(result, pattern)
      expect(result.stderr).not.toContain("PRIVATE KEY")
    }
    expect(await snapshot(url)).toBe("not migrated")
    // Nor does an export from a database service-auth never used create a schema there.
    expectRefusal(
      await runCli(["export", "--out", join(work, "stranger.json")], { DATABASE_URL: url }),
      /^service-auth export: PostgreSQL at .*\/sa_transfer_\w+ holds no service-auth database$/
    )
    expect(await snapshot(url)).toBe("not migrated")
  }, TRANSFER_TEST_DEADLINE_MS)

  it("moves embedded to embedded as well", async () => {
    const copy = join(work, "copy")
    const result = await runCli(["import", "--in", file, "--data-dir", copy])
    expect(result.code).toBe(0)
    expect(statSync(copy).mode & 0o777).toBe(0o700)
    const server = await start({ ADMIN_TOKEN, DATA_DIR: copy })
    try {
      expect((await callService(server, target, token)).status).toBe(200)
      expect((await callService(server, target, rotatedToken)).status).toBe(200)
      expect((await requestToken(server, target)).status).toBe(200)
    } finally {
      await server.stop()
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it("a sealed database moves sealed: the target server needs the same KEY_ENCRYPTION_KEY, and says so without it", async () => {
    const sealedDir = join(work, "sealed")
    const keyEncryptionKey = randomBytes(32).toString("base64")
    const source = await start({ ADMIN_TOKEN, DATA_DIR: sealedDir, KEY_ENCRYPTION_KEY: keyEncryptionKey })
    let sealed: Target
    let sealedToken: string
    try {
      const profile = `sealed-${randomBytes(4).toString("hex")}`
      expect((await adminCall(source, "PUT", `/admin/profiles/${profile}`)).status).toBe(201)
      expect((await adminCall(source, "PUT", `/admin/profiles/${profile}/environments/production`)).status).toBe(201)
      const service = await adminCall(source, "POST", `/admin/profiles/${profile}/environments/production/services`, {
        name: "vault",
        auth_type: "oauth"
      })
      const created = await adminCall(
        source,
        "POST",
        `/admin/profiles/${profile}/environments/production/services/${service.body.uuid}/credentials`
      )
      sealed = { profile, uuid: service.body.uuid, clientId: created.body.client_id, secret: created.body.client_secret }
      const issued = await requestToken(source, sealed)
      expect(issued.status).toBe(200)
      sealedToken = ((await issued.json()) as { access_token: string }).access_token
    } finally {
      expect(await source.stop()).toBe(0)
    }

    const sealedFile = join(work, "sealed.json")
    expect((await runCli(["export", "--out", sealedFile], { DATA_DIR: sealedDir })).code).toBe(0)
    const text = readFileSync(sealedFile, "utf8")
    // No more plaintext in the file than in the database.
    expect(text).not.toContain("PRIVATE KEY")
    const { tables } = JSON.parse(text)
    expect(tables.signing_keys).toHaveLength(1)
    expect(tables.signing_keys[0].private_key).toMatch(/^enc:v1:/)
    expect(tables.server_keys).toEqual([
      expect.objectContaining({ name: "credential_digest_key", value: expect.stringMatching(/^enc:v1:/) })
    ])

    const url = await createDatabase()
    const imported = await runCli(["import", "--in", sealedFile], { DATABASE_URL: url })
    expect(imported.stderr).toBe("")
    expect(imported.code).toBe(0)

    // Without the key the target server does not start, and one line says why.
    const refused = await start({ ADMIN_TOKEN, DATABASE_URL: url }).then(
      async (started) => `started (${await started.stop()})`,
      (error: Error) => error.message
    )
    expect(refused).toMatch(/credential_digest_key is stored encrypted, and KEY_ENCRYPTION_KEY is not set/)
    const server = await start({ ADMIN_TOKEN, DATABASE_URL: url, KEY_ENCRYPTION_KEY: keyEncryptionKey })
    try {
      expect((await callService(server, sealed, sealedToken)).status).toBe(200)
      const issued = await requestToken(server, sealed)
      expect(issued.status).toBe(200)
      expect(kidOf(((await issued.json()) as { access_token: string }).access_token)).toBe(kidOf(sealedToken))
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  it.effect("every table of the migrated schema is exported or declared transient", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(createDatabase)
      const missing = yield* unclassifiedSchema.pipe(
        Effect.provide(Storage.layerMigrated(Storage.layerPostgresClient(Redacted.make(url))))
      )
      // A table or column added by a migration must be added to ExportedTables or TRANSIENT_TABLES
      // (src/storage/Transfer.ts), or the export refuses to run.
      expect(missing).toEqual([])
      expect(Object.keys(TRANSIENT_TABLES)).toContain("service_auth_migrations")

      // What another branch might add without saying how it moves: found, and the export refuses.
      yield* Effect.promise(() =>
        admin(async (client) => {
          await client.query(`CREATE TABLE webhooks (id bigserial PRIMARY KEY, url text NOT NULL)`)
          await client.query(`ALTER TABLE services ADD COLUMN note text`)
        }, url)
      )
      const found = yield* unclassifiedSchema.pipe(
        Effect.provide(Storage.layerMigrated(Storage.layerPostgresClient(Redacted.make(url))))
      )
      expect(found).toEqual(["column services.note", "table webhooks"])
      const refused = yield* Effect.promise(() => runCli(["export", "--out", join(work, "incomplete.json")], { DATABASE_URL: url }))
      expectRefusal(
        refused,
        /^service-auth export: this service-auth does not know how to export column services\.note, table webhooks: the file would be incomplete$/
      )
      expect(existsSync(join(work, "incomplete.json"))).toBe(false)
    }), 60_000)
})
