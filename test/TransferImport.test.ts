/**
 * `service-auth import` (docs/operators.md) of a fresh export (test/support/TransferRun.ts: a source
 * on an embedded data directory with a rotated signing key, an audit trail and a deleted credential):
 * into an empty PostgreSQL database, where a server accepts the tokens of both keys with the same
 * schedule and history, and a second import refuses; into a database where a server merely started
 * (its generated keys are replaced); into another embedded data directory; and a corrupt or foreign
 * file refused before the database is touched. Needs TEST_DATABASE_URL (each test makes its own databases).
 */
import { expect, it } from "@effect/vitest"
import { readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describeWithPostgres } from "./support/Databases.js"
import {
  runCli,
  createDatabase,
  snapshot,
  start,
  adminCall,
  requestToken,
  callService,
  kidOf,
  expectNoSecret,
  expectRefusal,
  TRANSFER_TEST_DEADLINE_MS,
  ADMIN_TOKEN,
  transferSource
} from "./support/TransferRun.js"

describeWithPostgres("import into PostgreSQL and the embedded database", () => {
  const { work, file, source } = transferSource({ exported: true })

  it(
    "imports into PostgreSQL: the credential made before the move gets a token, the tokens of both keys still work, keys and history are the same",
    async () => {
      const { target, spare, token, rotatedToken, sourceKeys, sourceAudit } = source()
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
    const { target, token, rotatedToken, sourceKeys } = source()
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
    const { target, token, rotatedToken } = source()
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
})
