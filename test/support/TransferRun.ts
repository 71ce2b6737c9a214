/**
 * The export/import run's harness: `node dist/cli.mjs` with only the storage settings a case gives,
 * throwaway PostgreSQL databases on the server of TEST_DATABASE_URL, and the source every case moves.
 * `transferSource` (called inside a `describe`, it registers that block's hooks) starts a server on
 * an embedded data directory, makes a profile, a service and credentials (one deleted), a token,
 * rotates the signing key and takes a second token, and remembers the source's keys and audit trail;
 * with `exported`, it also exports the source to `file` before the cases run.
 */
import { randomBytes } from "node:crypto"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { afterAll, beforeAll, expect } from "vitest"
import { TEST_DATABASE_URL } from "./Databases.js"
import { type ServerProcess, startServer } from "./ServerProcess.js"
import { adminFetch } from "./AdminFetch.js"

const CLI = fileURLToPath(new URL("../../dist/cli.mjs", import.meta.url))
export const ADMIN_TOKEN = randomBytes(24).toString("base64url")

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `node dist/cli.mjs ...args` with only the storage settings given here. */
export const runCli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  new Promise<CliResult>((resolve) => {
    const { DATABASE_URL: _url, DATA_DIR: _dir, ...inherited } = process.env
    execFile(process.execPath, [CLI, ...args], { env: { ...inherited, ...env }, timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
  })

/** A fresh database on the test server, dropped by `dropDatabases`. */
const databases: Array<string> = []
export const admin = async <A>(use: (client: pg.Client) => Promise<A>, url = TEST_DATABASE_URL!) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}
export const createDatabase = async () => {
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
export const snapshot = (url: string) =>
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
export const start = (env: Readonly<Record<string, string>>): Promise<ServerProcess> => startServer(env, { healthTimeoutMs: 120_000 })

export const adminCall = (server: ServerProcess, method: string, path: string, body?: unknown) =>
  adminFetch(server.base, ADMIN_TOKEN, method, path, body)

export interface Target {
  readonly profile: string
  readonly uuid: string
  readonly clientId: string
  readonly secret: string
}

export const requestToken = (server: ServerProcess, target: Target) =>
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

export const callService = (server: ServerProcess, target: Target, token: string) =>
  fetch(`${server.base}/service/${target.profile}/production/json/${target.uuid}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: `{"amount":42}`
  })

/** The kid in a token's header. */
export const kidOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString("utf8")).kid as string

/** The secrets and keys no output may show. */
export const expectNoSecret = (text: string, target: Target, token: string) => {
  expect(text).not.toContain(target.secret)
  expect(text).not.toContain(token)
  expect(text).not.toContain("PRIVATE KEY")
}

/** One line on stderr, nothing on stdout, exit 1. */
export const expectRefusal = (result: CliResult, pattern: RegExp) => {
  expect(result.code).toBe(1)
  expect(result.stdout).toBe("")
  expect(result.stderr.trim().split("\n")).toHaveLength(1)
  expect(result.stderr.trim()).toMatch(pattern)
}

/**
 * A test's deadline: each starts servers and CLI processes on fresh embedded or PostgreSQL databases,
 * tens of seconds apiece when both cores are busy. A deadline for a hang, not a speed limit.
 */
export const TRANSFER_TEST_DEADLINE_MS = 480_000

/** What the cases know of the source once it has stopped. */
export interface Source {
  readonly target: Target
  readonly spare: Target
  /** Signed by the first key, before the rotation; `rotatedToken` by the key that replaced it. */
  readonly token: string
  readonly rotatedToken: string
  /** `GET /admin/keys` and `GET /admin/audit` on the source, just before it stopped. */
  readonly sourceKeys: unknown
  readonly sourceAudit: unknown
}

/**
 * The source of a describe block: its work directory, data directory and export file at once, and
 * `source()` once the block's `beforeAll` has run. With `exported`, the file holds the source's export.
 */
export const transferSource = (options: { readonly exported: boolean }) => {
  const work = mkdtempSync(join(tmpdir(), "service-auth-transfer-"))
  const dataDir = join(work, "data")
  const file = join(work, "export.json")
  let made: Source | undefined

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
      const target: Target = { profile, uuid: service.body.uuid, clientId: created.body.client_id, secret: created.body.client_secret }
      const spare: Target = { ...target, clientId: second.body.client_id, secret: second.body.client_secret }
      const issued = await requestToken(server, target)
      expect(issued.status).toBe(200)
      const token = ((await issued.json()) as { access_token: string }).access_token
      expect((await adminCall(server, "POST", "/admin/keys/rotate")).status).toBe(201)
      const reissued = await requestToken(server, target)
      expect(reissued.status).toBe(200)
      const rotatedToken = ((await reissued.json()) as { access_token: string }).access_token
      expect(kidOf(rotatedToken)).not.toBe(kidOf(token))
      const sourceKeys: unknown = (await adminCall(server, "GET", "/admin/keys")).body
      expect((sourceKeys as any).keys.map((k: any) => k.status)).toEqual(["active", "retiring"])
      const sourceAudit: unknown = (await adminCall(server, "GET", "/admin/audit")).body
      expect((sourceAudit as any).events[0].action).toBe("key.rotated")
      made = { target, spare, token, rotatedToken, sourceKeys, sourceAudit }
    } finally {
      expect(await server.stop()).toBe(0)
    }
    if (options.exported) {
      const result = await runCli(["export", "--out", file], { DATA_DIR: dataDir })
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
    }
  }, TRANSFER_TEST_DEADLINE_MS)

  afterAll(async () => {
    await dropDatabases()
    rmSync(work, { recursive: true, force: true })
  }, 60_000)

  const source = () => {
    if (made === undefined) throw new Error("the source is made in beforeAll")
    return made
  }
  return { work, dataDir, file, source }
}
