/**
 * `service-auth import --merge` (docs/operators.md) of a fresh export (test/support/TransferRun.ts):
 * it adds what is missing and refuses a conflict, a foreign digest key, other signing keys and a
 * third live credential; into a database without live credentials it replaces the keys; and under a
 * running server, replaced signing keys are used within 2 s without a restart. Needs
 * TEST_DATABASE_URL (each test makes its own databases).
 */
import { expect, it } from "@effect/vitest"
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { seal } from "../src/keys/KeyEncryption.js"
import { describeWithPostgres } from "./support/Databases.js"
import {
  runCli,
  createDatabase,
  admin,
  snapshot,
  start,
  adminCall,
  requestToken,
  callService,
  kidOf,
  expectRefusal,
  TRANSFER_TEST_DEADLINE_MS,
  ADMIN_TOKEN,
  transferSource
} from "./support/TransferRun.js"

describeWithPostgres("import --merge into a database that holds data", () => {
  const { work, file, source } = transferSource({ exported: true })

  it("--merge adds what is missing, refuses a conflict, a foreign digest key and a third live credential", async () => {
    const { target, spare } = source()
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
    const { target, token, rotatedToken, sourceKeys } = source()
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
})
