/**
 * `service-auth export` (docs/operators.md), through the real processes: a server on an embedded
 * data directory makes credentials and a token and rotates its signing key (test/support/TransferRun.ts);
 * `node dist/cli.mjs export` refuses while a server runs there, writes a file of mode 0600 with digests
 * and keys but never a secret, and replaces an existing file only with --force. A second source seals
 * its keys with KEY_ENCRYPTION_KEY: they move sealed, and the target needs the same key. And a test
 * that fails when a table of the schema is neither exported nor declared transient. Needs
 * TEST_DATABASE_URL (each test makes its own databases).
 */
import { expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Storage from "../src/storage/Storage.js"
import { TRANSIENT_TABLES, unclassifiedSchema } from "../src/transfer/DatabaseSchema.js"
import { describeWithPostgres } from "./support/Databases.js"
import {
  runCli,
  createDatabase,
  admin,
  start,
  adminCall,
  requestToken,
  callService,
  kidOf,
  expectRefusal,
  TRANSFER_TEST_DEADLINE_MS,
  ADMIN_TOKEN,
  type Target,
  transferSource
} from "./support/TransferRun.js"

describeWithPostgres("export from the embedded database", () => {
  const { work, dataDir, file, source } = transferSource({ exported: false })

  it("refuses to export while a server runs on the data directory", async () => {
    const { target } = source()
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
    const { target, spare, token, rotatedToken } = source()
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
      "audit_events",
      "trusted_issuers"
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
