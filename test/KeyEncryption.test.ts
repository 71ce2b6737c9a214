/**
 * Secrets at rest (KEY_ENCRYPTION_KEY): the sealed form (AES-256-GCM, bound to the value's name),
 * and, on real `npm start` processes over a fresh PostgreSQL database read directly, that private
 * keys and the digest key are stored sealed, survive restarts (same kid, same tokens), are sealed
 * in place when found in plaintext, move to a new key through KEY_ENCRYPTION_KEY_PREVIOUS, and that
 * a missing or wrong key stops the start with one clear line. Also: the generated key of earlier
 * versions (server_keys `signing_key`) becomes the first stored key, with its kid.
 */
import { spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { fileURLToPath } from "node:url"
import * as Jose from "jose"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseEncryptionKey } from "../src/config/AppConfig.js"
import { open, seal } from "../src/keys/KeyEncryption.js"
import { freshDatabase, TEST_DATABASE_URL } from "./support/Databases.js"
import { freePort, type ServerProcess, startServer } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const FIRST_KEY = randomBytes(32)
const SECOND_KEY = randomBytes(32)

describe("the sealed form", () => {
  it("round-trips under the same key and name; another key or name does not open it", () => {
    const sealed = seal(FIRST_KEY, "signing_key:abc", "secret text")
    expect(sealed).toMatch(/^enc:v1:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$/)
    expect(sealed).not.toContain("secret")
    expect(open(FIRST_KEY, "signing_key:abc", sealed)).toBe("secret text")
    expect(open(SECOND_KEY, "signing_key:abc", sealed)).toBeUndefined()
    expect(open(FIRST_KEY, "signing_key:abd", sealed)).toBeUndefined()
    expect(open(FIRST_KEY, "signing_key:abc", sealed.slice(0, -2))).toBeUndefined()
    // A fresh IV each time.
    expect(seal(FIRST_KEY, "n", "v")).not.toBe(seal(FIRST_KEY, "n", "v"))
  })

  it("KEY_ENCRYPTION_KEY is 32 bytes, as 64 hex digits or base64", () => {
    expect(parseEncryptionKey(FIRST_KEY.toString("hex"))).toEqual(FIRST_KEY)
    expect(parseEncryptionKey(FIRST_KEY.toString("base64"))).toEqual(FIRST_KEY)
    expect(parseEncryptionKey(FIRST_KEY.toString("base64url"))).toEqual(FIRST_KEY)
    for (const bad of ["", "short", randomBytes(16).toString("hex"), randomBytes(33).toString("base64"), "z".repeat(64)]) {
      expect(parseEncryptionKey(bad)).toBeUndefined()
    }
  })
})

/** `npm start` run to its exit: the output and the exit code (killed after 20 s). */
const startToExit = async (env: Record<string, string>) => {
  const port = await freePort()
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn("npm", ["start", "--silent"], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warning", ADMIN_TOKEN, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    // A hang's deadline: on a busy machine npm and node alone can take many seconds to start.
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), 45_000)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

const expectStartRefused = (result: { code: number | null; output: string }, pattern: RegExp) => {
  expect(result.code, result.output).toBe(1)
  const lines = result.output.split("\n").filter((line) => line.trim() !== "")
  expect(lines, result.output).toHaveLength(1)
  expect(lines[0]).toMatch(/^service-auth could not start: /)
  expect(lines[0]).toMatch(pattern)
  for (const key of [FIRST_KEY, SECOND_KEY]) {
    expect(result.output).not.toContain(key.toString("hex"))
    expect(result.output).not.toContain(key.toString("base64"))
  }
}

describe("a wrongly written KEY_ENCRYPTION_KEY", () => {
  it("stops the start with one line that does not repeat it", async () => {
    const result = await startToExit({ KEY_ENCRYPTION_KEY: "not-32-bytes-of-anything", DATA_DIR: "/nonexistent/never-created" })
    expectStartRefused(result, /KEY_ENCRYPTION_KEY must be 32 bytes/)
    expect(result.output).not.toContain("not-32-bytes-of-anything")
  }, 30_000)
})

describe.skipIf(TEST_DATABASE_URL === undefined)("secrets at rest on PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>
  let client: pg.Client
  const running: Array<ServerProcess> = []

  beforeAll(async () => {
    database = await freshDatabase()
    client = new pg.Client({ connectionString: database.url })
    await client.connect()
  })
  afterAll(async () => {
    await Promise.all(running.map((server) => server.stop()))
    await client?.end()
    await database?.drop()
  })

  const start = async (env: Record<string, string>) => {
    const server = await startServer({ DATABASE_URL: database.url, ADMIN_TOKEN, ...env })
    running.push(server)
    return server
  }
  const stop = async (server: ServerProcess) => {
    expect(await server.stop()).toBe(0)
    running.splice(running.indexOf(server), 1)
  }
  const stored = async () => {
    const keys = await client.query("SELECT kid, private_key FROM signing_keys ORDER BY active_from")
    const digest = await client.query("SELECT value FROM server_keys WHERE name = 'credential_digest_key'")
    return {
      keys: keys.rows as Array<{ kid: string; private_key: string }>,
      digest: digest.rows[0]?.value as string
    }
  }
  const listedKids = async (server: ServerProcess) => {
    const response = await fetch(`${server.base}/admin/keys`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(response.status).toBe(200)
    return ((await response.json()) as { keys: Array<{ kid: string }> }).keys.map((key) => key.kid)
  }

  it(
    "plaintext at first; sealed in place at the start with a key; kept across restarts; moved to a new key; refused without it",
    async () => {
      const plain = await start({})
      const [kid] = await listedKids(plain)
      await stop(plain)
      const before = await stored()
      expect(before.keys.map((key) => key.kid)).toEqual([kid])
      expect(before.keys[0]!.private_key).toMatch(/^-----BEGIN PRIVATE KEY-----/)
      const digest = before.digest
      expect(digest).toMatch(/^[A-Za-z0-9_-]{43}$/)

      // With a key (hex): sealed in place, same kid.
      const sealedServer = await start({ KEY_ENCRYPTION_KEY: FIRST_KEY.toString("hex") })
      expect(await listedKids(sealedServer)).toEqual([kid])
      // A rotation under the key is stored sealed too.
      const rotated = await fetch(`${sealedServer.base}/admin/keys/rotate`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
      })
      expect(rotated.status).toBe(201)
      await stop(sealedServer)
      const sealed = await stored()
      expect(sealed.keys).toHaveLength(2)
      for (const key of sealed.keys) {
        expect(key.private_key).toMatch(/^enc:v1:/)
        expect(key.private_key).not.toContain("PRIVATE KEY")
        expect(open(FIRST_KEY, `signing_key:${key.kid}`, key.private_key)).toMatch(/^-----BEGIN PRIVATE KEY-----/)
      }
      expect(sealed.digest).toMatch(/^enc:v1:/)
      expect(open(FIRST_KEY, "credential_digest_key", sealed.digest)).toBe(digest)

      // Without the key, or with another: one line, no start.
      expectStartRefused(await startToExit({ DATABASE_URL: database.url }), /stored encrypted, and KEY_ENCRYPTION_KEY is not set/)
      expectStartRefused(
        await startToExit({ DATABASE_URL: database.url, KEY_ENCRYPTION_KEY: SECOND_KEY.toString("base64") }),
        /KEY_ENCRYPTION_KEY does not decrypt .*KEY_ENCRYPTION_KEY_PREVIOUS/
      )

      // A new key (base64) with the old one as previous: everything sealed again with the new one.
      const moved = await start({
        KEY_ENCRYPTION_KEY: SECOND_KEY.toString("base64"),
        KEY_ENCRYPTION_KEY_PREVIOUS: FIRST_KEY.toString("hex")
      })
      expect(await listedKids(moved)).toEqual(sealed.keys.map((key) => key.kid).reverse())
      await stop(moved)
      const resealed = await stored()
      for (const key of resealed.keys) {
        expect(open(SECOND_KEY, `signing_key:${key.kid}`, key.private_key)).toMatch(/^-----BEGIN PRIVATE KEY-----/)
        expect(open(FIRST_KEY, `signing_key:${key.kid}`, key.private_key)).toBeUndefined()
      }
      expect(open(SECOND_KEY, "credential_digest_key", resealed.digest)).toBe(digest)

      // The new key alone now suffices; the old one alone no longer does.
      const again = await start({ KEY_ENCRYPTION_KEY: SECOND_KEY.toString("base64url") })
      expect((await listedKids(again)).sort()).toEqual(sealed.keys.map((key) => key.kid).sort())
      await stop(again)
      expectStartRefused(
        await startToExit({ DATABASE_URL: database.url, KEY_ENCRYPTION_KEY: FIRST_KEY.toString("hex") }),
        /does not decrypt/
      )
    },
    180_000
  )

  it("the generated key of an earlier version becomes the first stored key, with its kid, and leaves server_keys", async () => {
    const legacy = await freshDatabase()
    try {
      // An earlier version's database: migrated, with its key in server_keys and none in signing_keys.
      const server = await startServer({ DATABASE_URL: legacy.url, ADMIN_TOKEN })
      await server.stop()
      const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
      const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString()
      const jwk = privateKey.export({ format: "jwk" })
      const kid = await Jose.calculateJwkThumbprint({ kty: "RSA", n: jwk.n!, e: jwk.e! })
      const legacyClient = new pg.Client({ connectionString: legacy.url })
      await legacyClient.connect()
      try {
        await legacyClient.query("DELETE FROM signing_keys")
        await legacyClient.query("INSERT INTO server_keys (name, value) VALUES ('signing_key', $1)", [pem])
        const upgraded = await startServer({ DATABASE_URL: legacy.url, ADMIN_TOKEN })
        try {
          expect(await listedKids(upgraded)).toEqual([kid])
          const jwks = await (await fetch(`${upgraded.base}/.well-known/jwks.json`)).json() as { keys: Array<{ kid: string }> }
          expect(jwks.keys.map((key) => key.kid)).toEqual([kid])
        } finally {
          await upgraded.stop()
        }
        const left = await legacyClient.query("SELECT name FROM server_keys WHERE name = 'signing_key'")
        expect(left.rows).toEqual([])
      } finally {
        await legacyClient.end()
      }
    } finally {
      await legacy.drop()
    }
  }, 120_000)
})
