/**
 * `credentials add --federated ISSUER --subject SUB [--claim NAME=VALUE]...` through the built CLI
 * against one real server (test/support/CliProcess.ts): the whole run an operator makes (an issuer
 * added, a federated credential on a service, a token obtained with a workload token from
 * test/support/WorkloadIssuer.ts), `credentials list` showing the issuer and subject in place of a
 * secret, and the refusals: the server's (400, 409 while the credential names the issuer) and the
 * command line's.
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CLI_TEST_DEADLINE_MS, cli, cliJson, tokenRequest, uniqueProfile, useCliServer } from "./support/CliProcess.js"
import { githubClaims, startWorkloadIssuer, type WorkloadIssuer } from "./support/WorkloadIssuer.js"

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
const AUDIENCE = "https://auth.test"

describe("service-auth credentials add --federated", () => {
  useCliServer()
  let workload: WorkloadIssuer
  beforeAll(async () => {
    workload = await startWorkloadIssuer()
  })
  afterAll(() => workload?.close())

  /** A profile with an environment and a service, and an issuer allowing that profile. */
  const setUp = async () => {
    const profile = uniqueProfile()
    const issuer = `gh-${randomBytes(4).toString("hex")}`
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const service = await cliJson(["services", "create", profile, "production", "--name", "billing"])
    await cliJson([
      "issuers",
      "add",
      issuer,
      "--issuer",
      workload.url,
      "--profiles",
      profile,
      "--audience",
      AUDIENCE,
      "--allow-insecure-loopback"
    ])
    return { profile, issuer, target: [profile, "production", service.uuid as string] as const }
  }

  const token = (target: ReadonlyArray<string>, clientId: string, assertion: string) =>
    tokenRequest({
      client_id: clientId,
      client_assertion_type: JWT_BEARER,
      client_assertion: assertion,
      profile: target[0]!,
      environment: target[1]!,
      service_uuid: target[2]!
    })

  it("issuer added, federated credential added and listed, a token for the workload's token", async () => {
    const { issuer, target } = await setUp()
    const subject = "repo:acme/billing:environment:production"
    const added = await cli([
      "credentials",
      "add",
      ...target,
      "--federated",
      issuer,
      "--subject",
      subject,
      "--claim",
      "repository=acme/billing",
      "--claim",
      "environment=production",
      "--expires-at",
      "2099-01-01T00:00:00Z"
    ])
    expect(added.code, added.stderr).toBe(0)
    const clientId = /^client_id +(svc_[0-9a-f]{32})$/m.exec(added.stdout)?.[1]
    expect(clientId).toBeDefined()
    expect(added.stdout).toMatch(new RegExp(`^issuer +${issuer}$`, "m"))
    expect(added.stdout).toMatch(new RegExp(`^subject +${subject}$`, "m"))
    expect(added.stdout).toMatch(/^claims +environment=production, repository=acme\/billing$/m)
    expect(added.stdout).toMatch(/^expires_at +2099-01-01T00:00:00Z$/m)
    expect(added.stdout).not.toContain("secret")
    expect(added.stderr).toContain("no secret: the client sends its workload's token from the issuer as client_assertion")

    // The list shows who it accepts in place of a secret; a secret credential beside it reads "secret".
    const secret = await cliJson(["credentials", "add", ...target])
    const listed = await cli(["credentials", "list", ...target])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/^CLIENT ID +KEY +CREATED +LAST USED +EXPIRES$/m)
    expect(listed.stdout).toMatch(
      new RegExp(`^${clientId} +${issuer}: ${subject} \\(\\+2 claims\\) +\\S+Z +never +2099-01-01T00:00:00Z$`, "m")
    )
    expect(listed.stdout).toMatch(new RegExp(`^${secret.client_id} +secret +`, "m"))
    const json = await cliJson(["credentials", "list", ...target])
    expect(json.credentials.find((c: { client_id: string }) => c.client_id === clientId).federated).toEqual({
      issuer,
      subject,
      claims: { environment: "production", repository: "acme/billing" }
    })

    // The workload's token is the client's proof; another repository's is not.
    const now = Math.floor(Date.now() / 1000)
    const granted = await token(target, clientId!, await workload.sign(githubClaims(now, AUDIENCE)))
    const body = (await granted.json()) as { access_token?: string; token_type?: string }
    expect(granted.status, JSON.stringify(body)).toBe(200)
    expect(body.token_type).toBe("Bearer")
    expect(body.access_token).toMatch(/^ey/)
    const stranger = await token(target, clientId!, await workload.sign({ ...githubClaims(now, AUDIENCE), repository: "acme/other" }))
    expect(stranger.status).toBe(401)

    // --json: the admin API's document.
    await cliJson(["credentials", "remove", ...target, secret.client_id, "--yes"])
    const second = await cliJson([
      "credentials",
      "add",
      ...target,
      "--federated",
      issuer,
      "--subject",
      "repo:acme/billing:ref:refs/heads/main"
    ])
    expect(second).toEqual({
      client_id: expect.stringMatching(/^svc_/),
      created_at: expect.any(String),
      federated: { issuer, subject: "repo:acme/billing:ref:refs/heads/main" },
      token_endpoint_auth_method: "federated_jwt"
    })

    // The issuer cannot go while credentials name it (409, naming them); once they are removed, it can.
    const refused = await cli(["issuers", "remove", issuer])
    expect(refused.code).toBe(1)
    expect(refused.stdout).toBe("")
    expect(refused.stderr).toMatch(new RegExp(`^service-auth: The trusted issuer ${issuer} is used by live federated credentials: `))
    expect(refused.stderr).toContain(clientId)
    expect(refused.stderr).toContain(second.client_id)
    for (const id of [clientId!, second.client_id]) await cliJson(["credentials", "remove", ...target, id, "--yes"])
    expect(await cliJson(["issuers", "remove", issuer])).toEqual({ name: issuer, deleted: true })
  }, CLI_TEST_DEADLINE_MS)

  it("refuses an issuer that does not allow the profile (400), and options that do not go together", async () => {
    const { issuer, target } = await setUp()
    const elsewhere = await setUp()
    const notAllowed = await cli(["credentials", "add", ...elsewhere.target, "--federated", issuer, "--subject", "x"])
    expect(notAllowed.code).toBe(1)
    expect(notAllowed.stdout).toBe("")
    expect(notAllowed.stderr).toBe(`service-auth: issuer: no trusted issuer named ${issuer} allows profile ${elsewhere.profile}\n`)

    const exitOne: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [["--subject", "x"], "--subject and --claim need --federated ISSUER"],
      [["--claim", "a=b"], "--subject and --claim need --federated ISSUER"],
      [["--federated", issuer], "--federated needs --subject SUB: the exact sub of the workload's tokens"],
      [["--federated", issuer, "--subject", "x", "--public-key", "package.json"], "--federated and --public-key are two kinds"],
      [["--federated", issuer, "--subject", "x", "--claim", "sub=y"], "claims may not name sub (checked by the token endpoint itself)"]
    ]
    for (const [options, words] of exitOne) {
      const run = await cli(["credentials", "add", ...target, ...options])
      expect(run.code, `${options.join(" ")}: ${run.stderr}`).toBe(1)
      expect(run.stderr).toContain(words)
    }
    const exitTwo: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [["--federated", issuer, "--subject", "x", "--claim", "novalue"], `--claim "novalue": expected NAME=VALUE`],
      [["--federated", issuer, "--subject", "x", "--claim", "a=1", "--claim", "a=2"], "--claim a is given twice"],
      [["--federated", "no such issuer", "--subject", "x"], "name must be 1-64 letters"]
    ]
    for (const [options, words] of exitTwo) {
      const run = await cli(["credentials", "add", ...target, ...options])
      expect(run.code, `${options.join(" ")}: ${run.stderr}`).toBe(2)
      expect(run.stderr).toContain(words)
    }
    // Nothing was added by a refusal.
    expect((await cliJson(["credentials", "list", ...target])).credentials).toEqual([])
  }, CLI_TEST_DEADLINE_MS)
})
