/**
 * The admin CLI as an operator runs it: the built `dist/cli.mjs` (the package's bin) in a child
 * process, against one real server for the whole file (test/support/CliProcess.ts). Exit codes,
 * stdout and stderr are asserted as a script would read them. A credential's whole life is in
 * test/CliCredentials.test.ts, beside this file; help on a terminal in test/CliHelp.test.ts; rotate's
 * wait in test/CliRotateWait.test.ts.
 */
import { randomUUID } from "node:crypto"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import {
  ADMIN_TOKEN,
  type Run,
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
import { freePort } from "./support/ServerProcess.js"

describe("service-auth admin CLI", () => {
  useCliServer()

  it("creates a proxy service with a timeout and static headers read from the environment, never printing a value", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const secret = `cli-${randomUUID()}`
    const args = ["services", "create", profile, "production", "--proxy", "https://upstream.example/api", "--timeout-ms", "2500"]
    const created = await cli([...args, "--header", "X-Api-Key=UPSTREAM_KEY"], { UPSTREAM_KEY: secret })
    expect(created.code, created.stderr).toBe(0)
    expect(created.stdout).toContain("proxy https://upstream.example/api, timeout 2500 ms, headers X-Api-Key")
    expect(created.stdout + created.stderr).not.toContain(secret)
    const unset = await cli([...args, "--header", "X-Api-Key=NOT_SET_ANYWHERE"], { NOT_SET_ANYWHERE: undefined })
    expect(unset.code).not.toBe(0)
    expect(unset.stderr).toContain("--header X-Api-Key: the environment variable NOT_SET_ANYWHERE is not set")
    const withoutProxy = await cli(["services", "create", profile, "production", "--timeout-ms", "2500"])
    expect(withoutProxy.stderr).toContain("--timeout-ms and --header need --proxy URL")
    await cliJson(["profiles", "delete", profile])
  }, 120_000)

  it.skipIf(!HAS_SCRIPT)("asks before removing on a terminal", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "staging"])
    const { uuid } = await cliJson(["services", "create", profile, "staging"])
    const { client_id } = await cliJson(["credentials", "add", profile, "staging", uuid])
    const remove = `credentials remove ${profile} staging ${uuid} ${client_id}`
    const declined = await onTerminal(remove, "n")
    expect(declined.code).toBe(1)
    expect(declined.output).toContain(`Remove credential ${client_id}`)
    expect((await cliJson(["credentials", "list", profile, "staging", uuid])).credentials).toHaveLength(1)
    const accepted = await onTerminal(remove, "y")
    expect(accepted.code, accepted.output).toBe(0)
    expect(accepted.output).toContain(`removed ${client_id}`)
    expect((await cliJson(["credentials", "list", profile, "staging", uuid])).credentials).toHaveLength(0)
    await cliJson(["profiles", "delete", profile])
  }, CLI_TEST_DEADLINE_MS)

  it("lists the audit trail: who changed what, newest first, a page at a time", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const { uuid } = await cliJson(["services", "create", profile, "production"])
    const credential = await cliJson(["credentials", "add", profile, "production", uuid])
    await cliJson(["credentials", "remove", profile, "production", uuid, credential.client_id, "--yes"])

    const page = await cliJson(["audit", "list", "--profile", profile])
    expect(page.events.map((event: any) => event.action)).toEqual([
      "credential.removed",
      "credential.added",
      "service.created",
      "environment.created",
      "profile.created"
    ])
    expect(page.events[0]).toMatchObject({
      actor: "admin",
      profile,
      environment: "production",
      service_uuid: uuid,
      client_id: credential.client_id
    })
    expect(page.next).toBeNull()
    expect(JSON.stringify(page)).not.toContain(credential.client_secret)

    const first = await cli(["audit", "list", "--profile", profile, "--limit", "2"])
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(/^TIME +ACTOR +SOURCE +ACTION/)
    expect(first.stdout.trim().split("\n")).toHaveLength(3)
    const cursor = /--after (\S+)/.exec(first.stderr)?.[1]
    expect(cursor).toBeDefined()
    const older = await cliJson(["audit", "list", "--profile", profile, "--limit", "2", "--after", cursor!])
    expect(older.events.map((event: any) => event.action)).toEqual(["service.created", "environment.created"])

    const refused = await cli(["audit", "list", "--limit", "0"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toBe("service-auth: limit: limit must be an integer from 1 to 500\n")
    await cliJson(["profiles", "delete", profile])
  }, CLI_TEST_DEADLINE_MS)

  it("fails with exit 1 and the server's error_description", async () => {
    const unknown = await cli(["environments", "create", "no-such-profile-cli", "production"])
    expect(unknown.code).toBe(1)
    expect(unknown.stdout).toBe("")
    const direct = await fetch(`${server.base}/admin/profiles/no-such-profile-cli/environments/production`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
    })
    expect(direct.status).toBe(404)
    expect(unknown.stderr).toBe(`service-auth: ${(await direct.json()).error_description}\n`)
    const unknownJson = await cli(["services", "list", "no-such-profile-cli", "production", "--json"])
    expect(unknownJson).toMatchObject({ code: 1, stdout: "", stderr: "service-auth: Profile not found\n" })

    const wrongToken = await cli(["profiles", "list"], { ADMIN_TOKEN: "not-the-admin-token" })
    // A refusal names where the token came from.
    expect(wrongToken).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "service-auth: The admin token is not valid: the CLI sent the admin token from ADMIN_TOKEN; " +
        `is it the one of the server at ${server.base}?\n`
    })
    expect(wrongToken.stderr).not.toContain("not-the-admin-token")

    const tokenDir = mkdtempSync(join(tmpdir(), "service-auth-cli-token-"))
    const noToken = await cli(["profiles", "list"], { ADMIN_TOKEN: undefined, DATA_DIR: tokenDir })
    expect(noToken.code).toBe(1)
    expect(noToken.stderr).toContain("ADMIN_TOKEN is not set")
    // The token an embedded server keeps in DATA_DIR/admin-token serves a server on this machine only.
    writeFileSync(join(tokenDir, "admin-token"), `${ADMIN_TOKEN}\n`, { mode: 0o600 })
    const fromFile = await cli(["profiles", "list", "--json"], { ADMIN_TOKEN: undefined, DATA_DIR: tokenDir })
    expect(fromFile.code, fromFile.stderr).toBe(0)
    writeFileSync(join(tokenDir, "admin-token"), "another-servers-admin-token\n", { mode: 0o600 })
    const staleFile = await cli(["profiles", "list"], { ADMIN_TOKEN: undefined, DATA_DIR: tokenDir })
    expect(staleFile.code).toBe(1)
    expect(staleFile.stderr).toContain(`the CLI sent the admin token from ${join(tokenDir, "admin-token")} (ADMIN_TOKEN is not set`)
    expect(staleFile.stderr).not.toContain("another-servers-admin-token")
    writeFileSync(join(tokenDir, "admin-token"), `${ADMIN_TOKEN}\n`, { mode: 0o600 })
    const elsewhere = await cli(["profiles", "list", "--url", "http://auth.example.invalid"], {
      ADMIN_TOKEN: undefined,
      DATA_DIR: tokenDir
    })
    expect(elsewhere.code).toBe(1)
    expect(elsewhere.stderr).toContain("ADMIN_TOKEN is not set")
    rmSync(tokenDir, { recursive: true, force: true })

    const port = await freePort()
    const started = Date.now()
    const unreachable = await cli(["profiles", "list", "--url", `http://127.0.0.1:${port}`])
    expect(unreachable.code).toBe(1)
    expect(unreachable.stdout).toBe("")
    expect(unreachable.stderr).toBe(
      `service-auth: cannot reach the service-auth server at http://127.0.0.1:${port}: connection refused ` +
        "(is it running? is --url or SERVICE_AUTH_URL right?)\n"
    )
    // The refusal itself, not the CLI's 30 s request timeout (which says "no answer within").
    console.info(`an unreachable server reported in ${Date.now() - started} ms`)
    const fromEnvironment = await cli(["profiles", "list"], { SERVICE_AUTH_URL: `http://127.0.0.1:${port}/` })
    expect(fromEnvironment.stderr).toContain(`http://127.0.0.1:${port}: connection refused`)

    const badUrl = await cli(["profiles", "list", "--url", "localhost:3000"])
    expect(badUrl.code).toBe(1)
    expect(badUrl.stderr).toContain("invalid server URL")
  }, CLI_TEST_DEADLINE_MS)

  it("refuses a bad command line with exit 2 and says why", async () => {
    const missing = await cli(["credentials", "list", "acme", "production"])
    expect(missing.code).toBe(2)
    expect(missing.stdout).toBe("")
    expect(missing.stderr).toMatch(/service-uuid/)
    // A name the server could never hold is refused before any request: `..` would leave the path.
    const dotDot = await cli(["environments", "delete", "acme", ".."])
    expect(dotDot.code).toBe(2)
    expect(dotDot.stderr).toContain("environment must be 1-128 characters")
    const badUuid = await cli(["services", "delete", "acme", "production", "not-a-uuid"])
    expect(badUuid.code).toBe(2)
    expect(badUuid.stderr).toContain("service uuid must be a UUID")
    const badAuthType = await cli(["services", "create", "acme", "production", "--auth-type", "basic"])
    expect(badAuthType.code).toBe(2)
    expect(badAuthType.stderr).toContain("oauth")
    const badDuration = await cli([
      "rotate",
      "acme",
      "production",
      "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10",
      `svc_${"0".repeat(32)}`,
      "--idle",
      "soon"
    ])
    expect(badDuration.code).toBe(2)
    expect(badDuration.stderr).toContain("--idle must be a positive duration")
    // A wrong word under a group names that group and its commands.
    const unknownCommand = await cli(["credentials", "rotate"])
    expect(unknownCommand).toEqual({
      code: 2,
      stdout: "",
      stderr: "service-auth: \"rotate\" is not a command of service-auth credentials: use one of list, add, remove, " +
        "allow-introspection (see service-auth credentials --help)\n"
    })
    const unknownTop = await cli(["credential"])
    expect(unknownTop.code).toBe(2)
    expect(unknownTop.stderr).toContain("\"credential\" is not a command of service-auth: use one of profiles, environments,")
    // The library's built-ins that do nothing useful here are refused like any unknown option.
    for (const option of ["--wizard", "--completions", "--log-level"]) {
      const refused = await cli(["profiles", "list", option, "bash"])
      expect(refused).toEqual({
        code: 2,
        stdout: "",
        stderr: `service-auth: ${option} is not an option of service-auth (see service-auth --help)\n`
      })
    }
  }, CLI_TEST_DEADLINE_MS)

  it("has --help on every command", async () => {
    const commands = [
      [],
      ["profiles"],
      ["profiles", "list"],
      ["profiles", "create"],
      ["profiles", "delete"],
      ["environments"],
      ["environments", "create"],
      ["environments", "delete"],
      ["services"],
      ["services", "list"],
      ["services", "create"],
      ["services", "delete"],
      ["credentials"],
      ["credentials", "list"],
      ["credentials", "add"],
      ["credentials", "remove"],
      ["rotate"],
      ["audit"],
      ["audit", "list"]
    ]
    // Three at a time: each is a node process start, and the machine may be shared.
    const runs: Array<Run> = []
    for (let index = 0; index < commands.length; index += 3) {
      const batch = commands.slice(index, index + 3)
      runs.push(...(await Promise.all(batch.map((command) => cli([...command, "--help"], { ADMIN_TOKEN: undefined })))))
    }
    runs.forEach((run, index) => {
      const command = commands[index]!
      expect(run.code, command.join(" ")).toBe(0)
      expect(run.stdout, command.join(" ")).toContain(command.at(-1) ?? "service-auth")
      expect(run.stdout, command.join(" ")).toContain("USAGE")
    })
    const helpOf = (...command: Array<string>) => runs[commands.findIndex((c) => c.join(" ") === command.join(" "))]!.stdout
    expect(helpOf("rotate")).toContain("--idle DURATION")
    expect(helpOf("credentials", "remove")).toContain("--yes")
    expect(helpOf("audit", "list")).toContain("--after")
    // A group run without its subcommand lists them, rather than print nothing.
    const bare = await cli(["credentials"], { ADMIN_TOKEN: undefined })
    expect(bare.code).toBe(0)
    expect(bare.stdout).toContain("COMMANDS")
    expect(bare.stdout).toContain("remove")
  }, CLI_TEST_DEADLINE_MS)
})

/** Runs the CLI under a pseudo-terminal (script(1)) and answers its prompt with `answer`. */
const onTerminal = (args: string, answer: string) =>
  new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn("script", ["-qec", `${process.execPath} ${CLI} ${args}`, "/dev/null"], {
      cwd: ROOT,
      env: { ...process.env, ADMIN_TOKEN, SERVICE_AUTH_URL: server.base },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let output = ""
    let answered = false
    const onOutput = (chunk: Buffer) => {
      output += chunk.toString()
      if (!answered && output.includes("Remove credential")) {
        answered = true
        child.stdin.write(answer)
      }
    }
    child.stdout.on("data", onOutput)
    child.stderr.on("data", onOutput)
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
