/**
 * A credential's whole life through the admin CLI, and rotate's refusals: the built CLI in child
 * processes against one real server (test/support/CliProcess.ts). Apart from test/Cli.test.ts so
 * that the two files' CLI runs go side by side.
 */
import { describe, expect, it } from "vitest"
import { ADMIN_TOKEN, CLI_TEST_DEADLINE_MS, cli, cliJson, server, tokenRequest, uniqueProfile, useCliServer } from "./support/CliProcess.js"

describe("service-auth admin CLI", () => {
  useCliServer()

  it("takes a credential through its whole life", async () => {
    const profile = uniqueProfile()
    const target = (uuid: string) => [profile, "production", uuid]

    const created = await cli(["profiles", "create", profile])
    expect(created).toMatchObject({ code: 0, stdout: `created profile ${profile}\n` })
    expect((await cli(["profiles", "create", profile])).stdout).toContain("already exists")
    const listed = await cli(["profiles", "list"])
    expect(listed.code).toBe(0)
    expect(listed.stdout).toMatch(/^PROFILE +CREATED\n/)
    expect(listed.stdout).toMatch(new RegExp(`^${profile} +\\d{4}-\\d\\d-\\d\\dT`, "m"))
    expect((await cliJson(["profiles", "list"])).profiles).toContainEqual(
      expect.objectContaining({ profile, created_at: expect.any(String) })
    )

    expect(await cliJson(["environments", "create", profile, "production"])).toEqual({ name: "production", services: [] })

    const service = await cliJson(["services", "create", profile, "production", "--auth-type", "oauth", "--name", "billing"])
    expect(service).toMatchObject({ name: "billing", auth_type: "oauth", handler: { type: "echo" }, credentials: [] })
    const uuid: string = service.uuid
    const services = await cli(["services", "list", profile, "production"])
    expect(services.code).toBe(0)
    expect(services.stdout).toMatch(new RegExp(`^${uuid} +billing +oauth +echo +0$`, "m"))
    expect((await cliJson(["services", "list", profile, "production"])).services).toEqual([service])

    // credentials add: the secret is printed once, and works.
    const first = await cli(["credentials", "add", ...target(uuid)])
    expect(first.code, first.stderr).toBe(0)
    const firstId = /^client_id +(svc_[0-9a-f]{32})$/m.exec(first.stdout)![1]!
    const firstSecret = /^client_secret +(\S+)$/m.exec(first.stdout)![1]!
    expect(first.stderr).toContain("shown once")
    const tokenFor = (clientId: string, secret: string) =>
      tokenRequest({ client_id: clientId, client_secret: secret, profile, environment: "production", service_uuid: uuid })
    const firstToken = await tokenFor(firstId, firstSecret)
    expect(firstToken.status).toBe(200)
    expect(await firstToken.json()).toMatchObject({ token_type: "Bearer", expires_in: 3600 })

    // credentials list: never a secret.
    const credentials = await cli(["credentials", "list", ...target(uuid)])
    expect(credentials.code).toBe(0)
    expect(credentials.stdout).toMatch(new RegExp(`^${firstId} +\\S+Z +\\d{4}-\\d\\d-\\d\\dT\\S+Z +never$`, "m"))
    expect(credentials.stdout + credentials.stderr).not.toContain(firstSecret)
    const credentialsJson = await cliJson(["credentials", "list", ...target(uuid)])
    expect(credentialsJson).toEqual({
      credentials: [{ client_id: firstId, created_at: expect.any(String), expires_at: null, last_used_at: expect.any(String) }]
    })
    expect(JSON.stringify(credentialsJson)).not.toContain(firstSecret)

    // rotate --force: the new credential printed (with its secret), the old one removed at once.
    const forced = await cli(["rotate", ...target(uuid), firstId, "--force", "--json"])
    expect(forced.code, forced.stderr).toBe(0)
    const second = JSON.parse(forced.stdout)
    expect(second).toEqual({
      client_id: expect.stringMatching(/^svc_[0-9a-f]{32}$/),
      client_secret: expect.any(String),
      created_at: expect.any(String),
      token_endpoint_auth_method: "client_secret_basic",
      replaces: firstId
    })
    expect(forced.stderr).toContain(`removed ${firstId}`)
    expect((await tokenFor(firstId, firstSecret)).status).toBe(401)
    expect(await (await tokenFor(firstId, firstSecret)).json()).toMatchObject({ error: "invalid_client" })
    expect((await tokenFor(second.client_id, second.client_secret)).status).toBe(200)

    // rotate --idle shorter than last_used_at can show a use: refused as a bad value (exit 2), nothing changed.
    const tooShort = await cli(["rotate", ...target(uuid), second.client_id, "--idle", "30s", "--poll", "300ms"])
    expect({ code: tooShort.code, stdout: tooShort.stdout }).toEqual({ code: 2, stdout: "" })
    expect(tooShort.stderr).toContain(
      "--idle must be at least 2m: last_used_at moves at most once a minute, so a credential in use can look unused " +
        "for shorter than that (the default, 1h2m, outlives any cached token)"
    )
    expect((await cliJson(["credentials", "list", ...target(uuid)])).credentials.map((c: any) => c.client_id)).toEqual([
      second.client_id
    ])
    // The wait itself is rotate's wait's (test/CliRotateWait.test.ts, on the TestClock); here, --force again.
    const again = await cli(["rotate", ...target(uuid), second.client_id, "--force", "--json"])
    expect(again.code, again.stderr).toBe(0)
    const third = JSON.parse(again.stdout)
    expect(third).toMatchObject({ client_id: expect.stringMatching(/^svc_/), replaces: second.client_id })
    expect(await (await tokenFor(second.client_id, second.client_secret)).json()).toMatchObject({ error: "invalid_client" })
    expect((await tokenFor(third.client_id, third.client_secret)).status).toBe(200)
    expect((await cliJson(["credentials", "list", ...target(uuid)])).credentials.map((c: any) => c.client_id)).toEqual([
      third.client_id
    ])
    // Secrets appear only where they were generated.
    expect((await cli(["services", "list", profile, "production", "--json"])).stdout).not.toContain(third.client_secret)

    // remove without --yes and without a terminal: refused at once, nothing removed.
    const asked = Date.now()
    const refused = await cli(["credentials", "remove", ...target(uuid), third.client_id])
    // Refused, not waiting for input (that would end at cli()'s kill deadline, with no exit code).
    console.info(`remove without --yes refused in ${Date.now() - asked} ms`)
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe("")
    expect(refused.stderr).toContain("pass --yes")
    expect((await tokenFor(third.client_id, third.client_secret)).status).toBe(200)

    const removed = await cli(["credentials", "remove", ...target(uuid), third.client_id, "--yes", "--json"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(JSON.parse(removed.stdout)).toMatchObject({ client_id: third.client_id, deleted: true })
    expect((await tokenFor(third.client_id, third.client_secret)).status).toBe(401)
    expect(await cliJson(["credentials", "list", ...target(uuid)])).toEqual({ credentials: [] })

    expect((await cli(["services", "delete", ...target(uuid)])).code).toBe(0)
    const environmentDeleted = await cli(["environments", "delete", profile, "production"])
    expect(environmentDeleted.code, environmentDeleted.stderr).toBe(0)
    expect(await cliJson(["profiles", "delete", profile])).toEqual({ profile, deleted: true })
    expect((await cliJson(["profiles", "list"])).profiles.map((p: any) => p.profile)).not.toContain(profile)
  }, CLI_TEST_DEADLINE_MS)

  it("rotate refuses an unknown credential and a full service, changing nothing", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const { uuid } = await cliJson(["services", "create", profile, "production"])
    const target = [profile, "production", uuid]
    const unknown = await cli(["rotate", ...target, `svc_${"0".repeat(32)}`, "--force"])
    expect(unknown.code).toBe(1)
    expect(unknown.stdout).toBe("")
    expect(unknown.stderr).toContain("nothing was changed")
    const a = await cliJson(["credentials", "add", ...target])
    await cliJson(["credentials", "add", ...target])
    const full = await cli(["rotate", ...target, a.client_id, "--force"])
    expect(full.code).toBe(1)
    expect(full.stdout).toBe("")
    // The server's own error_description, as the admin API answers it.
    const direct = await fetch(`${server.base}/admin/profiles/${profile}/environments/production/services/${uuid}/credentials`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
    })
    expect(direct.status).toBe(409)
    expect(full.stderr).toBe(`service-auth: ${(await direct.json()).error_description}\n`)
    expect((await cliJson(["credentials", "list", ...target])).credentials).toHaveLength(2)
    const both = await cli(["rotate", ...target, a.client_id, "--force", "--idle", "5m"])
    expect(both.code).toBe(1)
    expect(both.stderr).toContain("--force and --idle exclude each other")
    await cliJson(["profiles", "delete", profile])
  }, CLI_TEST_DEADLINE_MS)

  it("shows expiry: add --expires-at, list, and list --expiring across profiles", async () => {
    const profiles = [uniqueProfile(), uniqueProfile()]
    const expiries = [new Date(Date.now() + 5 * 86_400_000), new Date(Date.now() + 60 * 86_400_000)]
    const added: Array<string> = []
    for (const [index, profile] of profiles.entries()) {
      await cliJson(["profiles", "create", profile])
      await cliJson(["environments", "create", profile, "production"])
      const { uuid } = await cliJson(["services", "create", profile, "production"])
      const credential = await cliJson(["credentials", "add", profile, "production", uuid, "--expires-at", expiries[index]!.toISOString()])
      expect(credential.expires_at).toBe(expiries[index]!.toISOString())
      // The text answer says the expiry it set too.
      const inText = await cli(["credentials", "add", profile, "production", uuid, "--expires-at", expiries[index]!.toISOString()])
      expect(inText.stdout).toMatch(new RegExp(`^expires_at +${expiries[index]!.toISOString().replace(/\.\d{3}Z$/, "Z")}$`, "m"))
      const second = /^client_id +(\S+)$/m.exec(inText.stdout)![1]!
      expect((await cli(["credentials", "remove", profile, "production", uuid, second, "--yes"])).code).toBe(0)
      added.push(credential.client_id)
      const listed = await cli(["credentials", "list", profile, "production", uuid])
      expect(listed.stdout).toMatch(
        new RegExp(`^${credential.client_id} +\\S+Z +never +${expiries[index]!.toISOString().replace(/\.\d{3}Z$/, "Z")}$`, "m")
      )
    }
    const soon = await cliJson(["credentials", "list", "--expiring", "30d"])
    const ids = soon.credentials.map((c: { client_id: string }) => c.client_id)
    expect(ids).toContain(added[0])
    expect(ids).not.toContain(added[1])
    const text = await cli(["credentials", "list", "--expiring", "30d"])
    expect(text.stdout).toMatch(new RegExp(`^${profiles[0]} +production +\\S+ +${added[0]} +\\S+Z$`, "m"))
    const bad = await cli(["credentials", "list", "--expiring", "soon"])
    expect(bad.code).not.toBe(0)
    // The policy and a rate limit from the command line too.
    const policy = await cliJson(["profiles", "create", profiles[0]!, "--credential-max-lifetime-days", "90"])
    expect(policy.credential_max_lifetime_days).toBe(90)
    expect(await cliJson(["profiles", "create", profiles[0]!, "--credential-max-lifetime-days", "none"])).not.toHaveProperty(
      "credential_max_lifetime_days"
    )
    // The upstream origins (the admin's decision): set, normalised, then removed with "".
    const origins = await cliJson([
      "profiles",
      "create",
      profiles[0]!,
      "--upstream-origins",
      "https://API.example.com/, http://127.0.0.1:9"
    ])
    expect(origins.upstream_origins).toEqual(["https://api.example.com", "http://127.0.0.1:9"])
    expect(await cliJson(["profiles", "create", profiles[0]!, "--upstream-origins", ""])).not.toHaveProperty("upstream_origins")
    const limited = await cliJson(["services", "create", profiles[0]!, "production", "--rate-limit", "100/60"])
    expect(limited.rate_limit).toEqual({ requests: 100, per_seconds: 60 })
    // A bad value is a bad command line: exit 2, as docs/operators.md says, naming what was given.
    for (const value of ["lots", "100"]) {
      const badLimit = await cli(["services", "create", profiles[0]!, "production", "--rate-limit", value])
      expect(badLimit.code, badLimit.stderr).toBe(2)
      expect(badLimit.stderr).toContain(`--rate-limit must be N/SECONDS, e.g. 100/60 (100 calls a minute), not "${value}"`)
    }
    const badExpiry = await cli(["credentials", "add", profiles[0]!, "production", limited.uuid, "--expires-at", "next tuesday"])
    expect(badExpiry.code, badExpiry.stderr).toBe(2)
    expect(badExpiry.stderr).toContain(`not "next tuesday"`)
    // require_dpop: only when asked for; shown in the text description when set.
    expect(limited).not.toHaveProperty("require_dpop")
    const strict = await cliJson(["services", "create", profiles[0]!, "production", "--require-dpop"])
    expect(strict.require_dpop).toBe(true)
    const strictText = await cli(["services", "create", profiles[0]!, "production", "--require-dpop"])
    expect(strictText.stdout).toMatch(/^require_dpop +yes: DPoP-bound tokens only$/m)
    const missing = await cli(["credentials", "list"])
    expect(missing).toEqual({
      code: 2,
      stdout: "",
      stderr: "service-auth: Missing argument <profile> (see service-auth credentials list --help)\n"
    })
    for (const profile of profiles) await cliJson(["profiles", "delete", profile])
  }, CLI_TEST_DEADLINE_MS)

  it("allows a resource server's credential to introspect, and takes it away", async () => {
    const profile = uniqueProfile()
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const { uuid } = await cliJson(["services", "create", profile, "production"])
    const rs = await cliJson(["credentials", "add", profile, "production", uuid])
    const target = [profile, "production", uuid, rs.client_id]
    const token = await (await tokenRequest({
      client_id: rs.client_id,
      client_secret: rs.client_secret,
      profile,
      environment: "production",
      service_uuid: uuid
    })).json() as { access_token: string }
    const introspect = () =>
      fetch(`${server.base}/oauth/introspect`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${rs.client_id}:${rs.client_secret}`).toString("base64")}`
        },
        body: new URLSearchParams({ token: token.access_token })
      })
    expect((await introspect()).status).toBe(403)

    const allowed = await cli(["credentials", "allow-introspection", ...target, "--profiles", `${profile}, other`])
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(allowed.stdout).toBe(
      `${rs.client_id} may introspect the tokens of ${[profile, "other"].sort().join(", ")} at POST /oauth/introspect, ` +
        "authenticating as at the token endpoint\n"
    )
    expect(await (await introspect()).json()).toMatchObject({ active: true, client_id: rs.client_id })
    const listed = await cli(["credentials", "list", profile, "production", uuid])
    expect(listed.stdout).toMatch(/^CLIENT ID +CREATED +LAST USED +EXPIRES +INTROSPECTS$/m)
    expect(listed.stdout).toContain([profile, "other"].sort().join(","))
    expect((await cliJson(["credentials", "list", profile, "production", uuid])).credentials[0].introspect_profiles)
      .toEqual([profile, "other"].sort())

    const bad = await cli(["credentials", "allow-introspection", ...target, "--profiles", "Not A Profile"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("is not a profile identifier")
    const cleared = await cliJson(["credentials", "allow-introspection", ...target, "--profiles", ""])
    expect(cleared.introspect_profiles).toEqual([])
    expect((await introspect()).status).toBe(403)
    await cliJson(["profiles", "delete", profile])
  }, CLI_TEST_DEADLINE_MS)
})
