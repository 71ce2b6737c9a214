/**
 * What a newcomer reads in the CLI's lists and policy option: `services list` shows a service's rate
 * limit and DPoP requirement, `credentials list` a key credential's key type; the profile's
 * credential lifetime follows the API's rule (1-3650, `none` removes it; 0 is a bad value, exit 2),
 * and the API names the field once when it refuses a value.
 */
import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ADMIN_TOKEN, CLI_TEST_DEADLINE_MS, cli, cliJson, server, uniqueProfile, useCliServer } from "./support/CliProcess.js"

const LIFETIME_RULE = "credential_max_lifetime_days: must be an integer from 1 to 3650 (days), or null to remove the policy"

describe("service-auth lists and the credential lifetime policy", () => {
  useCliServer()

  it("services list shows the rate limit and the DPoP requirement; credentials list the key type", async () => {
    const profile = uniqueProfile()
    expect((await cli(["profiles", "create", profile])).code).toBe(0)
    expect((await cli(["environments", "create", profile, "production"])).code).toBe(0)
    const plain = await cliJson(["services", "create", profile, "production", "--name", "plain"])
    const limited = await cliJson(["services", "create", profile, "production", "--name", "limited", "--rate-limit", "100/60"])
    const strict = await cliJson(["services", "create", profile, "production", "--name", "strict", "--require-dpop"])

    const services = await cli(["services", "list", profile, "production"])
    expect(services.code, services.stderr).toBe(0)
    expect(services.stdout).toMatch(/^UUID +NAME +AUTH +RATE LIMIT +DPOP +HANDLER +CREDENTIALS$/m)
    expect(services.stdout).toMatch(new RegExp(`^${plain.uuid} +plain +oauth +- +- +echo +0$`, "m"))
    expect(services.stdout).toMatch(new RegExp(`^${limited.uuid} +limited +oauth +100/60s +- +echo +0$`, "m"))
    expect(services.stdout).toMatch(new RegExp(`^${strict.uuid} +strict +oauth +- +required +echo +0$`, "m"))

    const dir = mkdtempSync(join(tmpdir(), "service-auth-cli-key-"))
    try {
      const file = join(dir, "client.pem")
      const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
      writeFileSync(file, publicKey.export({ type: "spki", format: "pem" }))
      const target = [profile, "production", plain.uuid]
      const secret = await cliJson(["credentials", "add", ...target])
      const key = await cliJson(["credentials", "add", ...target, "--public-key", file])
      const listed = await cli(["credentials", "list", ...target])
      expect(listed.code, listed.stderr).toBe(0)
      expect(listed.stdout).toMatch(/^CLIENT ID +KEY +CREATED +LAST USED +EXPIRES$/m)
      expect(listed.stdout).toMatch(new RegExp(`^${secret.client_id} +secret +\\S+Z +never +never$`, "m"))
      expect(listed.stdout).toMatch(new RegExp(`^${key.client_id} +EC P-256 key +\\S+Z +never +never$`, "m"))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, CLI_TEST_DEADLINE_MS)

  it("--credential-max-lifetime-days 0 is a bad value as in the API (exit 2, naming how to remove the policy)", async () => {
    const profile = uniqueProfile()
    expect((await cliJson(["profiles", "create", profile, "--credential-max-lifetime-days", "30"])).credential_max_lifetime_days)
      .toBe(30)
    for (const value of ["0", "3651", "1.5", "thirty"]) {
      const refused = await cli(["profiles", "create", profile, "--credential-max-lifetime-days", value])
      expect(refused.code, refused.stderr).toBe(2)
      expect(refused.stderr).toContain(
        `--credential-max-lifetime-days must be a whole number of days from 1 to 3650, not "${value}"; ` +
          "to remove the profile's policy: --credential-max-lifetime-days none"
      )
    }
    // Nothing was changed by a refused value; none removes the policy.
    expect((await cliJson(["profiles", "create", profile])).credential_max_lifetime_days).toBe(30)
    expect(await cliJson(["profiles", "create", profile, "--credential-max-lifetime-days", "none"])).not.toHaveProperty(
      "credential_max_lifetime_days"
    )

    // The API refuses 0 too, naming the field once; a string is told the same rule.
    for (const value of [0, "30", 1.5]) {
      const response = await fetch(`${server.base}/admin/profiles/${profile}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ credential_max_lifetime_days: value })
      })
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 400,
        body: { error: "invalid_request", error_description: LIFETIME_RULE }
      })
    }
  }, CLI_TEST_DEADLINE_MS)
})
