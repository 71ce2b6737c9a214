/**
 * Admin tokens (docs/contract.md §3 and §5): ADMIN_TOKENS' `name:token` pairs beside ADMIN_TOKEN
 * (actor `admin`), refused at start with a message that never quotes a token; each name
 * authenticates as itself; failed admin authentications are throttled per address like client
 * ones; and without any token the embedded server keeps a generated one in DATA_DIR/admin-token,
 * while PostgreSQL refuses to start.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Redacted, TestClock } from "effect"
import { spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"
import { isLoopbackHost, parseAdminTokens, weakAdminTokenProblem } from "../src/admin/AdminTokens.js"
import { AppConfig } from "../src/config/AppConfig.js"
import { asJsonResponse, expectErrorBody, oauthError, rawRequest, request } from "./support/Http.js"
import { freePort, startServer } from "./support/ServerProcess.js"
import { ADMIN_TOKEN, type JsonResponse, makeTestServer, serverPort } from "../src/testing.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const token = () => randomBytes(24).toString("base64url")

describe("ADMIN_TOKENS", () => {
  const names = (parsed: ReturnType<typeof parseAdminTokens>) =>
    Either.map(parsed, (entries) => entries.map((entry) => [entry.name, Redacted.value(entry.token)]))

  it("name:token pairs, comma-separated, beside ADMIN_TOKEN (actor admin); spaces around pairs are ignored", () => {
    const [a, b, c] = [token(), token(), token()]
    expect(names(parseAdminTokens(c, `alice:${a}, ci.deploy-1 : ${b}`))).toEqual(
      Either.right([["admin", c], ["alice", a], ["ci.deploy-1", b]])
    )
    expect(names(parseAdminTokens(undefined, `admin:${a}`))).toEqual(Either.right([["admin", a]]))
    expect(names(parseAdminTokens(undefined, " "))).toEqual(Either.right([]))
    expect(names(parseAdminTokens("", undefined))).toEqual(Either.right([]))
    expect(names(parseAdminTokens(undefined, `alice:${"A".repeat(16)}==`))).toEqual(Either.right([["alice", `${"A".repeat(16)}==`]]))
  })

  it("a malformed list is refused with its entry's position, never quoting a token", () => {
    const secret = token()
    const cases: ReadonlyArray<readonly [string | undefined, string, RegExp]> = [
      [undefined, secret, /^ADMIN_TOKENS entry 1 of 1 is not name:token$/],
      [undefined, `alice:${token()},${secret}`, /^ADMIN_TOKENS entry 2 of 2 is not name:token$/],
      [undefined, `alice:${token()},`, /^ADMIN_TOKENS entry 2 of 2 is not name:token$/],
      [undefined, `al ice:${secret}`, /^ADMIN_TOKENS entry 1 of 1: the name must be 1-64 letters, digits/],
      [undefined, `${"a".repeat(65)}:${secret}`, /^ADMIN_TOKENS entry 1 of 1: the name must be/],
      [undefined, `:${secret}`, /^ADMIN_TOKENS entry 1 of 1: the name must be/],
      [undefined, "alice:short", /^ADMIN_TOKENS entry 1 of 1 \(alice\): the token must be at least 16 characters of letters, digits/],
      [undefined, "alice:", /the token must be at least 16/],
      // Not sendable as a bearer token: it could never authenticate.
      [undefined, `alice:${secret.slice(0, 10)} ${secret.slice(10)}`, /the token must be at least 16 characters of letters/],
      [undefined, `alice:${secret}:x`, /the token must be at least 16 characters of letters/],
      [undefined, `alice:${secret}=x`, /the token must be at least 16 characters of letters/],
      [undefined, `alice:${token()},alice:${secret}`, /^ADMIN_TOKENS entry 2 of 2: the name alice is given twice$/],
      [token(), `admin:${secret}`, /^ADMIN_TOKENS entry 1 of 1: the name admin is ADMIN_TOKEN's; choose another name$/],
      [undefined, `alice:${secret},bob:${secret}`, /^ADMIN_TOKENS entry 2 of 2 \(bob\): the token is also alice's/],
      [secret, `bob:${secret}`, /^ADMIN_TOKENS entry 1 of 1 \(bob\): the token is also admin's/]
    ]
    for (const [adminToken, adminTokens, message] of cases) {
      const parsed = parseAdminTokens(adminToken, adminTokens)
      expect(Either.isLeft(parsed), adminTokens).toBe(true)
      const text = Either.getLeft(parsed).pipe((o) => (o._tag === "Some" ? o.value : ""))
      expect(text).toMatch(message)
      expect(text).not.toContain(secret)
      expect(text).not.toContain(secret.slice(0, 10))
    }
  })

  it.effect("the configuration: a problem is a start-up error; PostgreSQL without any admin token is one too", () =>
    Effect.gen(function*() {
      const fromEnv = (env: Record<string, string>) =>
        Effect.either(AppConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
      const secret = token()
      const malformed = yield* fromEnv({ ADMIN_TOKENS: `alice ${secret}` })
      expect(Either.getLeft(malformed).pipe((o) => (o._tag === "Some" ? o.value.message : ""))).toBe(
        "invalid setting: ADMIN_TOKENS entry 1 of 1 is not name:token"
      )
      const postgres = yield* fromEnv({ DATABASE_URL: "postgres://db.test/x" })
      expect(Either.getLeft(postgres).pipe((o) => (o._tag === "Some" ? o.value.message : ""))).toMatch(
        /^invalid setting: ADMIN_TOKEN or ADMIN_TOKENS is required with DATABASE_URL \(PostgreSQL\)/
      )
      const embedded = yield* fromEnv({})
      expect(Either.map(embedded, (config) => config.adminTokens)).toEqual(Either.right([]))
      const named = yield* fromEnv({ DATABASE_URL: "postgres://db.test/x", ADMIN_TOKENS: `alice:${secret}` })
      expect(Either.map(named, (config) => config.adminTokens.map((t) => t.name))).toEqual(Either.right(["alice"]))
    }))
})

const LIMIT = 4
const ALICE = token()
const BOB = token()

const bearer = (value: string) => ({ authorization: `Bearer ${value}` })

/** An admin GET from a chosen local address (127.0.0.2 plays another machine). */
const getFrom = (localAddress: string, path: string, headers: Record<string, string>) =>
  Effect.flatMap(serverPort, (port) => Effect.promise(() => rawRequest(port, { method: "GET", path, localAddress, headers }))).pipe(
    Effect.map(asJsonResponse)
  )

const TOO_MANY = {
  error: "too_many_attempts",
  error_description: "Too many failed admin authentication attempts from this address; retry later"
}

const expectTooMany = (response: JsonResponse) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 429, body: TOO_MANY })
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
  expect(Number(response.headers["retry-after"])).toBeGreaterThanOrEqual(1)
  expect(Number(response.headers["retry-after"])).toBeLessThanOrEqual(60)
}

describe(`named admin tokens over HTTP (AUTH_FAILURE_LIMIT=${LIMIT})`, () => {
  layer(
    makeTestServer({
      config: {
        authFailureLimit: LIMIT,
        adminTokens: [
          { name: "admin", token: Redacted.make(ADMIN_TOKEN) },
          { name: "alice", token: Redacted.make(ALICE) },
          { name: "bob", token: Redacted.make(BOB) }
        ]
      }
    })
  )((it) => {
    it.effect("each token authenticates as its name; a change is recorded with it", () =>
      Effect.gen(function*() {
        for (const [value, name] of [[ADMIN_TOKEN, "admin"], [ALICE, "alice"], [BOB, "bob"]] as const) {
          const profile = `tokens-${name}-${randomBytes(4).toString("hex")}`
          expect((yield* request("PUT", `/admin/profiles/${profile}`, { headers: bearer(value) })).status).toBe(201)
          const trail = yield* request("GET", `/admin/audit?profile=${profile}`, { headers: bearer(value) })
          expect(trail.body.events.map((e: any) => [e.action, e.actor])).toEqual([["profile.created", name]])
        }
      }))

    it.effect("a token that is none of them, or a prefix or extension of one → 401 unauthorized", () =>
      Effect.gen(function*() {
        // LIMIT of them: the next would be throttled.
        for (const wrong of [`${ALICE}x`, ALICE.slice(0, -1), "alice", token()]) {
          expectErrorBody(
            yield* getFrom("127.0.0.3", "/admin/profiles", bearer(wrong)),
            401,
            oauthError("unauthorized", "The admin token is not valid")
          )
        }
      }))

    it.effect("LIMIT failures from an address → 429 with Retry-After for it, right token or not, until its minute is over", () =>
      Effect.gen(function*() {
        const from = "127.0.0.4"
        // A success is not refused while under the limit, and does not reset the count.
        for (let i = 0; i < LIMIT; i++) {
          expect((yield* getFrom(from, "/admin/profiles", bearer(ALICE))).status).toBe(200)
          expect((yield* getFrom(from, "/admin/profiles", bearer(token()))).status).toBe(401)
        }
        expectTooMany(yield* getFrom(from, "/admin/profiles", bearer(token())))
        expectTooMany(yield* getFrom(from, "/admin/profiles", bearer(ALICE)))
        expectTooMany(yield* getFrom(from, "/admin/audit", bearer(BOB)))
        // Another address is unaffected; a missing header is a 401 that is not counted.
        expect((yield* getFrom("127.0.0.5", "/admin/profiles", bearer(BOB))).status).toBe(200)
        expect((yield* getFrom("127.0.0.5", "/admin/profiles", {})).status).toBe(401)
        yield* TestClock.adjust("61 seconds")
        expect((yield* getFrom(from, "/admin/profiles", bearer(ALICE))).status).toBe(200)
      }))
  })
})

// ---------------------------------------------------------------------------------------------------
// The real server

const dirs: Array<string> = []
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "service-auth-admin-token-"))
  dirs.push(dir)
  return dir
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

/**
 * A start that cannot succeed exits by itself within this: a wide margin for npm and node to start on
 * a busy machine (it exits before connecting). A server that hung would be killed at the deadline.
 */
const FAILS_WITHIN_MS = 30_000

/** `npm start` run to its exit (or killed at the deadline). */
const runToExit = (env: Record<string, string>, deadlineMs = FAILS_WITHIN_MS + 5_000) =>
  new Promise<{ code: number | null; output: string; ms: number }>((done) => {
    const started = Date.now()
    const child = spawn("npm", ["start", "--silent"], {
      cwd: ROOT,
      env: { ...process.env, HOST: "127.0.0.1", LOG_LEVEL: "warning", ADMIN_TOKEN: "", ADMIN_TOKENS: "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), deadlineMs)
    child.once("close", (code) => {
      clearTimeout(timer)
      done({ code, output, ms: Date.now() - started })
    })
  })

describe("the admin token of the real server", () => {
  it(
    "embedded, without any admin token: generated once into DATA_DIR/admin-token (0600), the same at every start, never printed",
    async () => {
      const dataDir = join(freshDir(), "data")
      const path = resolve(dataDir, "admin-token")
      const profile = `kept-${randomBytes(4).toString("hex")}`
      // A signing key of its own: generating one on a busy machine can outlast the storage timeout.
      const keyFile = join(dataDir, "..", "key.pem")
      writeFileSync(keyFile, generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }))
      const env = { DATA_DIR: dataDir, ADMIN_TOKEN: "", ADMIN_TOKENS: "", SIGNING_KEY_FILE: keyFile }
      const first = await startServer(env, { healthTimeoutMs: 100_000 })
      let stored = ""
      try {
        stored = readFileSync(path, "utf8").trim()
        expect(stored).toMatch(/^[A-Za-z0-9_-]{43}$/)
        expect(statSync(path).mode & 0o777).toBe(0o600)
        // The start line reaches us through npm's pipe, which may deliver it after /healthz answered.
        await expect.poll(() => first.log(), { timeout: 30_000 })
          .toContain(`ADMIN_TOKEN is not set: generated an admin token and kept it in ${path}`)
        expect(first.log()).not.toContain(stored)
        const created = await fetch(`${first.base}/admin/profiles/${profile}`, { method: "PUT", headers: bearer(stored) })
        expect(created.status).toBe(201)
      } finally {
        expect(await first.stop()).toBe(0)
      }
      const second = await startServer(env)
      try {
        expect(readFileSync(path, "utf8").trim()).toBe(stored)
        await expect.poll(() => second.log(), { timeout: 30_000 }).toContain(`ADMIN_TOKEN is not set: the admin token is in ${path}`)
        expect(second.log()).not.toContain(stored)
        const trail = await fetch(`${second.base}/admin/audit?profile=${profile}`, { headers: bearer(stored) })
        expect(((await trail.json()) as any).events.map((e: any) => [e.action, e.actor])).toEqual([["profile.created", "admin"]])
      } finally {
        expect(await second.stop()).toBe(0)
      }
    },
    180_000
  )

  it("PostgreSQL without any admin token: one line, exit 1, before connecting", async () => {
    const result = await runToExit({ PORT: String(await freePort()), DATABASE_URL: "postgres://postgres@127.0.0.1:1/x" })
    expect(result.code, result.output).toBe(1)
    const lines = result.output.split("\n").filter((line) => line.trim() !== "")
    expect(lines).toEqual([
      "service-auth could not start: invalid setting: ADMIN_TOKEN or ADMIN_TOKENS is required with DATABASE_URL (PostgreSQL): " +
      "the server generates an admin token only for the embedded database"
    ])
    console.info(`refused in ${result.ms} ms`)
    expect(result.ms).toBeLessThan(FAILS_WITHIN_MS)
  }, 60_000)

  it("a malformed ADMIN_TOKENS: one line that does not quote the token, exit 1", async () => {
    const secret = token()
    const result = await runToExit({ PORT: String(await freePort()), DATA_DIR: join(freshDir(), "data"), ADMIN_TOKENS: `alice=${secret}` })
    expect(result.code, result.output).toBe(1)
    expect(result.output.trim()).toBe("service-auth could not start: invalid setting: ADMIN_TOKENS entry 1 of 1 is not name:token")
    expect(result.output).not.toContain(secret)
  }, 60_000)

  it("an ADMIN_TOKEN weaker than the ADMIN_TOKENS rule stops a start beyond loopback: one line, exit 1, not quoting it", async () => {
    const result = await runToExit({
      PORT: String(await freePort()),
      HOST: "0.0.0.0",
      DATA_DIR: join(freshDir(), "data"),
      ADMIN_TOKEN: "change-me"
    })
    expect(result.code, result.output).toBe(1)
    expect(result.output.trim()).toBe(
      "service-auth could not start: invalid setting: ADMIN_TOKEN must be at least 16 characters of letters, digits, " +
        "'-', '.', '_', '~', '+', '/' (and '=' at the end) when HOST=0.0.0.0 reaches beyond this machine " +
        "(e.g. ADMIN_TOKEN=$(openssl rand -base64 32), or unset it and use the generated data/admin-token; " +
        "or HOST=127.0.0.1 to try it locally)"
    )
    expect(result.output).not.toContain("change-me")
  }, 60_000)

  it("on loopback a weak ADMIN_TOKEN starts, with a warning that says how to make it strong", async () => {
    const server = await startServer({ DATA_DIR: join(freshDir(), "data"), ADMIN_TOKEN: "change-me" }, { healthTimeoutMs: 100_000 })
    try {
      // Logged as the port opens: wait for it rather than race it.
      await expect.poll(() => server.log(), { timeout: 30_000 }).toContain("ADMIN_TOKEN is weak (it must be at least 16 characters")
      expect(server.log()).toContain("allowed only because HOST=127.0.0.1 is loopback")
      expect(server.log()).not.toContain("change-me")
      expect((await fetch(`${server.base}/admin/profiles`, { headers: bearer("change-me") })).status).toBe(200)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, 180_000)
})

describe("a weak ADMIN_TOKEN", () => {
  it("is judged by the ADMIN_TOKENS rule, and refused only where others can reach the server", () => {
    expect(weakAdminTokenProblem(token(), "0.0.0.0")).toBeUndefined()
    expect(weakAdminTokenProblem("", "0.0.0.0")).toBeUndefined()
    expect(weakAdminTokenProblem("x".repeat(15), "0.0.0.0")?.refused).toBe(true)
    expect(weakAdminTokenProblem(`${"x".repeat(20)} y`, "::")?.refused).toBe(true)
    expect(weakAdminTokenProblem("change-me", "192.168.1.10")?.refused).toBe(true)
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "::ffff:127.0.0.1"]) {
      expect(isLoopbackHost(host)).toBe(true)
      expect(weakAdminTokenProblem("change-me", host)?.refused).toBe(false)
    }
    expect(isLoopbackHost("0.0.0.0")).toBe(false)
    expect(isLoopbackHost("127.0.0.1.example.com")).toBe(false)
  })
})
