/**
 * The embedded data directory holds the signing key (in its tables and write-ahead log): it is
 * private to the server's user whatever the umask. Real processes started under umask 022, the
 * usual default that would leave PGlite's files readable by every local user.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startServer } from "./support/ServerProcess.js"

const ADMIN_TOKEN = "private-data-dir-admin-token"

/** Every path under `root` (and `root`), with its permission bits. */
const modes = (root: string): Array<{ readonly path: string; readonly mode: number; readonly directory: boolean }> => {
  const stats = lstatSync(root)
  const here = { path: root, mode: stats.mode & 0o777, directory: stats.isDirectory() }
  return stats.isDirectory()
    ? [here, ...readdirSync(root).flatMap((name) => modes(join(root, name)))]
    : [here]
}

const expectPrivate = (root: string) => {
  const all = modes(root)
  expect(all.length).toBeGreaterThan(100) // the database is really there
  const loose = all.filter(({ directory, mode }) => mode !== (directory ? 0o700 : 0o600))
  expect(loose.map(({ mode, path }) => `${mode.toString(8)} ${path}`)).toEqual([])
}

/** Writes enough to make PostgreSQL create relation files and WAL records after start. */
const writeSome = async (base: string) => {
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }
  for (let i = 0; i < 20; i++) {
    const profile = `p${i}`
    expect((await fetch(`${base}/admin/profiles/${profile}`, { method: "PUT", headers, body: "{}" })).status).toBe(201)
    const environment = await fetch(`${base}/admin/profiles/${profile}/environments/prod`, { method: "PUT", headers, body: "{}" })
    expect(environment.status).toBe(201)
  }
}

describe("the embedded data directory is private", () => {
  const dirs: Array<string> = []
  const freshDir = () => {
    const dir = join(mkdtempSync(join(tmpdir(), "service-auth-private-")), "data")
    dirs.push(dir)
    return dir
  }

  it("created 0700 with every file 0600 under umask 022, including files written while running", async () => {
    const dataDir = freshDir()
    const server = await startServer({ ADMIN_TOKEN, DATA_DIR: dataDir }, { umask: "022" })
    try {
      expectPrivate(dataDir)
      await writeSome(server.base)
      expectPrivate(dataDir)
    } finally {
      expect(await server.stop()).toBe(0)
    }
    expectPrivate(dataDir)
    expect(server.log()).not.toContain("readable or writable by other users")
  }, 90_000)

  it("an existing directory with looser modes is tightened at start, and the log says so once", async () => {
    const dataDir = freshDir()
    const first = await startServer({ ADMIN_TOKEN, DATA_DIR: dataDir }, { umask: "022" })
    expect(await first.stop()).toBe(0)
    // What an earlier version left behind: everything readable and writable by everyone.
    for (const { path, directory } of modes(dataDir)) chmodSync(path, directory ? 0o777 : 0o666)

    const second = await startServer({ ADMIN_TOKEN, DATA_DIR: dataDir }, { umask: "022" })
    try {
      expectPrivate(dataDir)
      await writeSome(second.base)
      expectPrivate(dataDir)
      const said = second.log().split("\n").filter((line) => line.includes("readable or writable by other users"))
      expect(said).toHaveLength(1)
      expect(said[0]).toContain("now private to this user")
    } finally {
      expect(await second.stop()).toBe(0)
    }
  }, 120_000)

  afterAll(() => dirs.forEach((dir) => rmSync(join(dir, ".."), { recursive: true, force: true })))
})
