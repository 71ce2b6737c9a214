/**
 * `issuers list|add|show|change|remove` through the built CLI against one real server
 * (test/support/CliProcess.ts), with a workload issuer on loopback (test/support/WorkloadIssuer.ts):
 * every setting of a trusted issuer set and changed, for people and with --json; the server's
 * refusals (403 for an owner token, 404, 409, 400) printed in its words with exit 1; a bad command
 * line refused before anything is sent (exit 2).
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  ADMIN_TOKEN,
  CLI,
  CLI_TEST_DEADLINE_MS,
  cli,
  cliJson,
  HAS_SCRIPT,
  ROOT,
  server,
  uniqueProfile,
  useCliServer
} from "./support/CliProcess.js"
import { startWorkloadIssuer, type WorkloadIssuer } from "./support/WorkloadIssuer.js"

/** `service-auth <args>` on a pseudo-terminal of `columns` columns (script(1)); what it printed. */
const onTerminal = (args: string, columns: number) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn("script", ["-qec", `stty cols ${columns} rows 50; ${process.execPath} ${CLI} ${args}`, "/dev/null"], {
      cwd: ROOT,
      env: { ...process.env, ADMIN_TOKEN, SERVICE_AUTH_URL: server.base, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    // Decoded once whole: a chunk may end in the middle of a character (…).
    const chunks: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.once("error", reject)
    child.once("close", () => {
      clearTimeout(timer)
      resolve(Buffer.concat(chunks).toString("utf8").replace(/\r\n/g, "\n"))
    })
  })

const uniqueIssuer = () => `cli-${randomBytes(4).toString("hex")}`

/** A refusal of the server: its words on stderr, nothing on stdout, exit 1. */
const expectRefused = (run: { code: number | null; stdout: string; stderr: string }, words: string) => {
  expect(run.code, run.stderr).toBe(1)
  expect(run.stdout).toBe("")
  expect(run.stderr).toBe(`service-auth: ${words}\n`)
}

describe("service-auth issuers", () => {
  useCliServer()
  let workload: WorkloadIssuer
  const dir = mkdtempSync(join(tmpdir(), "service-auth-cli-issuers-"))
  beforeAll(async () => {
    workload = await startWorkloadIssuer()
  })
  afterAll(async () => {
    await workload?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("adds, lists, shows, changes and removes an issuer, every setting, for people and with --json", async () => {
    const [profile, other] = [uniqueProfile(), uniqueProfile()]
    const name = uniqueIssuer()
    const added = await cli([
      "issuers",
      "add",
      name,
      "--issuer",
      workload.url,
      "--profiles",
      `${profile},${other}`,
      "--audience",
      "https://auth.test",
      "--algorithms",
      "RS256,ES256",
      "--max-token-lifetime",
      "10m",
      "--allow-insecure-loopback"
    ])
    expect(added.code, added.stderr).toBe(0)
    expect(added.stdout).toMatch(new RegExp(`^name +${name}$`, "m"))
    expect(added.stdout).toMatch(/^keys +discovery: http:\/\/127\.0\.0\.1:\d+\/cluster\/\.well-known\/openid-configuration$/m)
    expect(added.stdout).toMatch(/^audience +https:\/\/auth\.test$/m)
    expect(added.stdout).toMatch(/^algorithms +RS256, ES256$/m)
    expect(added.stdout).toMatch(/^max_token_lifetime +600 s$/m)
    expect(added.stdout).toMatch(new RegExp(`^profiles +${[profile, other].sort().join(", ")}$`, "m"))
    expect(added.stdout).toMatch(/^allow_insecure_loopback +yes/m)

    // Inline keys from a file, and from standard input; defaults for the rest.
    const file = join(dir, "jwks.json")
    writeFileSync(file, JSON.stringify(workload.jwks()))
    const inline = await cliJson([
      "issuers",
      "add",
      `${name}-file`,
      "--issuer",
      "https://oidc.example.com",
      "--profiles",
      profile,
      "--jwks",
      file
    ])
    expect(inline).toMatchObject({
      name: `${name}-file`,
      issuer: "https://oidc.example.com",
      jwks: workload.jwks(),
      algorithms: ["RS256", "ES256", "EdDSA"],
      max_token_lifetime_seconds: 3600,
      profiles: [profile],
      allow_insecure_loopback: false
    })
    const piped = await cli(
      ["issuers", "add", `${name}-stdin`, "--issuer", "https://oidc.example.com", "--profiles", "", "--jwks", "-"],
      {},
      JSON.stringify(workload.jwks().keys[0])
    )
    expect(piped.code, piped.stderr).toBe(0)
    expect(piped.stdout).toMatch(new RegExp(`^keys +inline JWKS, 1 key: ${workload.currentKid()}$`, "m"))
    expect(piped.stdout).toMatch(/^profiles +none/m)

    const listed = await cli(["issuers", "list"])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/^NAME +KEYS +PROFILES +ISSUER$/m)
    expect(listed.stdout).toMatch(new RegExp(`^${name} +discovery +${[profile, other].sort().join(",")} +${workload.url}$`, "m"))
    expect(listed.stdout).toMatch(new RegExp(`^${name}-file +inline \\(1\\) +${profile} +https://oidc\\.example\\.com$`, "m"))
    expect(listed.stdout).toMatch(new RegExp(`^${name}-stdin +inline \\(1\\) +- +https://oidc\\.example\\.com$`, "m"))
    const list = await cliJson(["issuers", "list"])
    expect(list.issuers.map((issuer: { name: string }) => issuer.name)).toEqual(
      expect.arrayContaining([name, `${name}-file`, `${name}-stdin`])
    )

    const shown = await cliJson(["issuers", "show", name])
    expect(shown).toEqual(list.issuers.find((issuer: { name: string }) => issuer.name === name))

    // change: the options given replace those settings, the others are kept.
    const changed = await cliJson(["issuers", "change", `${name}-file`, "--discovery", "--algorithms", "EdDSA", "--profiles", other])
    expect(changed).toEqual({
      ...inline,
      jwks: undefined,
      algorithms: ["EdDSA"],
      profiles: [other],
      updated_at: expect.any(String)
    })
    expect(changed).not.toHaveProperty("jwks")
    const rekeyed = await cliJson(["issuers", "change", `${name}-file`, "--jwks", file, "--max-token-lifetime", "7200"])
    expect(rekeyed).toMatchObject({ jwks: workload.jwks(), max_token_lifetime_seconds: 7200, algorithms: ["EdDSA"], profiles: [other] })
    // Plain http: on loopback needs the issuer's allowance: taken away, the server refuses (400).
    expectRefused(
      await cli(["issuers", "change", name, "--no-allow-insecure-loopback"]),
      "issuer may be http: only with allow_insecure_loopback (loopback hosts only)"
    )
    expect((await cliJson(["issuers", "show", name])).allow_insecure_loopback).toBe(true)

    for (const issuer of [name, `${name}-file`]) {
      expect(await cliJson(["issuers", "remove", issuer])).toEqual({ name: issuer, deleted: true })
    }
    const removed = await cli(["issuers", "remove", `${name}-stdin`])
    expect(removed.code, removed.stderr).toBe(0)
    expect(removed.stdout).toBe(`removed trusted issuer ${name}-stdin\n`)
    expect((await cliJson(["issuers", "list"])).issuers.map((issuer: { name: string }) => issuer.name)).not.toContain(name)
  }, CLI_TEST_DEADLINE_MS)

  it("prints the server's refusals: 403 for an owner token, 404, 409 for a name taken, 400 with its message", async () => {
    const profile = uniqueProfile()
    const name = uniqueIssuer()
    await cliJson(["profiles", "create", profile])
    const add = ["issuers", "add", name, "--issuer", workload.url, "--profiles", profile, "--allow-insecure-loopback"]
    await cliJson(add)

    const owner = (await cliJson(["tokens", "create", `${name}-owner`, "--role", "owner", "--profile", profile])).token
    for (const args of [["list"], ["show", name], [...add.slice(1)], ["change", name, "--audience", "x"], ["remove", name]]) {
      expectRefused(await cli(["issuers", ...args], { ADMIN_TOKEN: owner }), "Only an admin token may manage trusted issuers")
    }

    for (const args of [["show", "nobody"], ["change", "nobody", "--audience", "x"], ["remove", "nobody"]]) {
      expectRefused(await cli(["issuers", ...args]), "No trusted issuer has that name")
    }
    expectRefused(await cli(add), `A trusted issuer named ${name} exists`)

    expectRefused(
      await cli(["issuers", "add", `${name}-plain`, "--issuer", "http://issuer.example.com", "--profiles", profile]),
      "issuer must be an https: URL (http: only for a loopback host with allow_insecure_loopback)"
    )
    const weak = join(dir, "weak.json")
    writeFileSync(weak, JSON.stringify({ keys: [{ kty: "RSA", n: "AQAB", e: "AQAB" }] }))
    const badKey = await cli([
      "issuers",
      "add",
      `${name}-weak`,
      "--issuer",
      "https://oidc.example.com",
      "--profiles",
      profile,
      "--jwks",
      weak
    ])
    expect(badKey.code).toBe(1)
    expect(badKey.stderr).toMatch(/^service-auth: jwks\.keys\.0: /)
    // Refused here already, so the private key never travels.
    const secret = join(dir, "private.json")
    writeFileSync(secret, JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0" }] }))
    const privateKey = await cli([
      "issuers",
      "add",
      `${name}-p`,
      "--issuer",
      "https://oidc.example.com",
      "--profiles",
      "",
      "--jwks",
      secret
    ])
    expectRefused(privateKey, `${secret}: key 0 is a private or symmetric key: give the issuer's public keys only`)
    expect(privateKey.stderr).not.toContain("c2VjcmV0")
    expectRefused(
      await cli(["issuers", "add", `${name}-s`, "--issuer", "https://oidc.example.com", "--profiles", "", "--jwks", "-"], {}, "not json"),
      "standard input is not JSON: expected a JWK Set ({\"keys\": [...]})"
    )
    expectRefused(
      await cli(["issuers", "add", `${name}-n`, "--issuer", "https://oidc.example.com", "--profiles", "", "--jwks", join(dir, "none")]),
      `cannot read the JWKS file ${join(dir, "none")}`
    )
    expect(
      (await cliJson(["issuers", "list"])).issuers.map((issuer: { name: string }) => issuer.name).filter((n: string) => n.startsWith(name))
    )
      .toEqual([name])
  }, CLI_TEST_DEADLINE_MS)

  it.skipIf(!HAS_SCRIPT)("on a terminal, the list's lines are cut to its width; piped, they are whole", async () => {
    const name = uniqueIssuer()
    const url = `https://oidc.example.com/${"long-path/".repeat(8)}${name}`
    const file = join(dir, "fit.json")
    writeFileSync(file, JSON.stringify(workload.jwks()))
    await cliJson(["issuers", "add", name, "--issuer", url, "--profiles", uniqueProfile(), "--jwks", file])
    const narrow = await onTerminal("issuers list", 70)
    const row = narrow.split("\n").find((line) => line.startsWith(`${name} `))
    expect(row).toMatch(/…$/)
    expect(row!.length).toBe(70)
    expect(narrow.split("\n").every((line) => line.length <= 70)).toBe(true)
    const piped = await cli(["issuers", "list"])
    expect(piped.stdout).toMatch(new RegExp(`^${name} +inline \\(1\\) +\\S+ +${url}$`, "m"))
    expect(await cliJson(["issuers", "remove", name])).toEqual({ name, deleted: true })
  }, CLI_TEST_DEADLINE_MS)

  it("refuses a bad command line before anything is sent (exit 2)", async () => {
    const refusals: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [
        ["add", "x", "--issuer", "https://a.example", "--profiles", "a", "--algorithms", "HS256"],
        "--algorithms must list some of RS256, ES256, EdDSA"
      ],
      [["add", "x", "--issuer", "https://a.example", "--profiles", "a", "--max-token-lifetime", "8d"], "--max-token-lifetime must be"],
      [
        ["add", "x", "--issuer", "https://a.example", "--profiles", "Not A Profile"],
        "--profiles: \"Not A Profile\" is not a profile identifier"
      ],
      [["add", "x", "--issuer", "https://a.example"], "Expected to find option: '--profiles'"],
      [["show", "../x"], "name must be 1-64 letters, digits, '.', '_' or '-'"],
      [["change", "x"], "nothing to change: give the options to change"],
      [["change", "x", "--jwks", "f", "--discovery"], "--jwks and --discovery contradict each other"],
      [["change", "x", "--allow-insecure-loopback", "--no-allow-insecure-loopback"], "contradict each other"]
    ]
    for (const [args, words] of refusals) {
      const run = await cli(["issuers", ...args])
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(2)
      expect(run.stdout).toBe("")
      expect(run.stderr, args.join(" ")).toContain(words)
    }
  }, CLI_TEST_DEADLINE_MS)
})
