/**
 * `tokens create|list|revoke` through the built CLI against one real server
 * (test/support/CliProcess.ts): a token printed once, listed without it, working with its scope,
 * refused once revoked; an owner token may not manage tokens; an introspector token only introspects.
 */
import { describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { CLI_TEST_DEADLINE_MS, cli, cliJson, server, uniqueProfile, useCliServer } from "./support/CliProcess.js"

describe("service-auth tokens", () => {
  useCliServer()

  it("creates a token shown once, lists it without the token, and revokes it", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    const name = `cli-${randomBytes(4).toString("hex")}`

    const created = await cli(["tokens", "create", name, "--role", "owner", "--profile", profile])
    expect(created.code, created.stderr).toBe(0)
    const token = /^token +(\S+)$/m.exec(created.stdout)?.[1]
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(created.stdout).toMatch(new RegExp(`^role +owner$`, "m"))
    expect(created.stderr).toContain("shown once")
    expect(created.stderr).not.toContain("warning")

    const listed = await cli(["tokens", "list"])
    expect(listed.code).toBe(0)
    expect(listed.stdout).toMatch(/^NAME +ROLE +PROFILES +CREATED +LAST USED\n/)
    expect(listed.stdout).toMatch(new RegExp(`^${name} +owner +${profile} +\\S+ +never$`, "m"))
    expect(listed.stdout).not.toContain(token)
    const json = await cliJson(["tokens", "list"])
    expect(json.tokens.find((t: any) => t.name === name)).toMatchObject({ role: "owner", profiles: [profile], last_used_at: null })

    // The owner token works within its profile, and may not manage tokens.
    expect((await cli(["profiles", "list"], { ADMIN_TOKEN: token })).stdout).toContain(profile)
    const refused = await cli(["tokens", "list"], { ADMIN_TOKEN: token })
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("Only an admin token may manage admin tokens")

    const clash = await cli(["tokens", "create", name, "--role", "admin"])
    expect(clash.code).not.toBe(0)
    expect(clash.stderr).toContain(`An admin token named ${name} exists`)
    const missingProfiles = await cli(["tokens", "create", `${name}-v`, "--role", "viewer"])
    expect(missingProfiles.code).not.toBe(0)
    expect(missingProfiles.stderr).toContain("needs profiles")

    expect(await cliJson(["tokens", "revoke", name])).toEqual({ name, revoked: true })
    const revoked = await cli(["profiles", "list"], { ADMIN_TOKEN: token })
    expect(revoked.code).not.toBe(0)
    expect(revoked.stderr).toContain("The admin token is not valid")
    const again = await cli(["tokens", "revoke", name])
    expect(again.code).not.toBe(0)
    expect(again.stderr).toContain("No stored admin token has that name")
  }, CLI_TEST_DEADLINE_MS)

  it("says which of a new token's profiles do not exist (yet), and still creates it", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    const typo = `${profile}x`
    const name = `cli-${randomBytes(4).toString("hex")}`
    const created = await cli(["tokens", "create", name, "--role", "owner", "--profile", profile, "--profile", typo])
    expect(created.code, created.stderr).toBe(0)
    expect(created.stderr).toContain(
      `service-auth: warning: there is no profile ${typo} (yet): the token reaches it only once it is created ` +
        `(profiles create ${typo}); check the name\n`
    )
    const two = await cli(["tokens", "create", `${name}-2`, "--role", "viewer", "--profile", typo, "--profile", `${typo}y`])
    expect(two.code, two.stderr).toBe(0)
    expect(two.stderr).toContain(`warning: there are no profiles ${typo}, ${typo}y (yet): the token reaches each only once it is created`)
  }, CLI_TEST_DEADLINE_MS)

  it("creates an introspector token: good for POST /oauth/introspect, refused everything else", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    const name = `rs-${randomBytes(4).toString("hex")}`
    const created = await cli(["tokens", "create", name, "--role", "introspector", "--profile", profile])
    expect(created.code, created.stderr).toBe(0)
    expect(created.stdout).toMatch(new RegExp(`^role +introspector$`, "m"))
    const token = /^token +(\S+)$/m.exec(created.stdout)?.[1]
    const refused = await cli(["profiles", "list"], { ADMIN_TOKEN: token! })
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("An introspector token may only introspect tokens")
    expect((await cli(["tokens", "create", `${name}-x`, "--role", "introspector"])).stderr).toContain("needs profiles")
    const introspected = await fetch(`${server.base}/oauth/introspect`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
      body: "token=not-a-token"
    })
    expect([introspected.status, await introspected.json()]).toEqual([200, { active: false }])
  }, CLI_TEST_DEADLINE_MS)
})
