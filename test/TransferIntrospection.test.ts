/**
 * `export` and `import` carry which profiles' tokens a credential may introspect
 * (`introspect_profiles`): a resource server's credential moved to another database still
 * introspects there; a file written before the column existed imports with none. The built CLI and
 * server on fresh PostgreSQL databases (needs TEST_DATABASE_URL).
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { startServer } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"

const CLI = fileURLToPath(new URL("../dist/cli.mjs", import.meta.url))
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const FORM = { "content-type": "application/x-www-form-urlencoded" }

const runCli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  new Promise<{ readonly code: number | null; readonly stderr: string }>((resolve) => {
    const { DATABASE_URL: _url, DATA_DIR: _dir, ...inherited } = process.env
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...inherited, ...env }, timeout: 120_000 },
      (error, _stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stderr })
    )
  })

describe.skipIf(TEST_DATABASE_URL === undefined)("export and import carry introspect_profiles", () => {
  const drops: Array<() => Promise<void>> = []
  const dir = mkdtempSync(join(tmpdir(), "service-auth-transfer-introspection-"))
  afterAll(async () => {
    await Promise.all(drops.map((drop) => drop()))
    rmSync(dir, { recursive: true, force: true })
  })
  const database = async () => {
    const made = await freshDatabase()
    drops.push(made.drop)
    return made.url
  }

  it("a resource server's credential introspects after a move; an older file imports with none", async () => {
    const source = await database()
    const first = await startServer({ DATABASE_URL: source, ADMIN_TOKEN }, { healthTimeoutMs: 120_000 })
    const profile = `tr-${randomBytes(4).toString("hex")}`
    const path = `/admin/profiles/${profile}/environments/prod/services`
    let servicePath: string
    let rs: { client_id: string; client_secret: string }
    try {
      await adminJson(first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}`)
      await adminJson(first.base, ADMIN_TOKEN, "PUT", `/admin/profiles/${profile}/environments/prod`)
      const service = await adminJson(first.base, ADMIN_TOKEN, "POST", path, { name: "rs", auth_type: "oauth" })
      servicePath = `${path}/${service.uuid}`
      rs = await adminJson(first.base, ADMIN_TOKEN, "POST", `${servicePath}/credentials`)
      await adminJson(first.base, ADMIN_TOKEN, "PUT", `${servicePath}/credentials/${rs.client_id}/introspect_profiles`, {
        introspect_profiles: [profile, "acme"]
      })
    } finally {
      await first.stop()
    }
    const file = join(dir, "export.json")
    const exported = await runCli(["export", "--out", file], { DATABASE_URL: source })
    expect(exported.code, exported.stderr).toBe(0)
    const document = JSON.parse(readFileSync(file, "utf8"))
    const row = document.tables.credentials.find((c: { client_id: string }) => c.client_id === rs.client_id)
    expect(row.introspect_profiles).toEqual(["acme", profile].sort())

    // An older file: the same, without the member.
    const older = join(dir, "older.json")
    delete row.introspect_profiles
    writeFileSync(older, JSON.stringify(document))

    const [target, olderTarget] = [await database(), await database()]
    expect((await runCli(["import", "--in", file], { DATABASE_URL: target })).code).toBe(0)
    expect((await runCli(["import", "--in", older], { DATABASE_URL: olderTarget })).code).toBe(0)
    for (const [url, expected] of [[target, ["acme", profile].sort()], [olderTarget, undefined]] as const) {
      const server = await startServer({ DATABASE_URL: url, ADMIN_TOKEN }, { healthTimeoutMs: 120_000 })
      try {
        const listed = await adminJson(server.base, ADMIN_TOKEN, "GET", `${servicePath!}/credentials`)
        expect(listed.credentials[0].introspect_profiles).toEqual(expected)
        const introspected = await fetch(`${server.base}/oauth/introspect`, {
          method: "POST",
          headers: { ...FORM, authorization: `Basic ${Buffer.from(`${rs!.client_id}:${rs!.client_secret}`).toString("base64")}` },
          body: new URLSearchParams({ token: "not-a-token" })
        })
        expect(introspected.status).toBe(expected === undefined ? 403 : 200)
      } finally {
        await server.stop()
      }
    }
  }, 300_000)
})
