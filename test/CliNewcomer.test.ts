/**
 * The CLI where a newcomer meets it, with the same steps and the same mistakes: the
 * documented command (`npm run --silent cli -- …`) runs the built CLI without rebuilding `dist/`;
 * `--json` and `--url` go before or after the command; every parse error is one
 * `service-auth: <why> (see <command> --help)` line with exit 2; help has its title once, marks
 * the options that may be left out and names its environment variables; a self-signed
 * certificate's failure names NODE_EXTRA_CA_CERTS.
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { createServer } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { SERVICE_VERSION } from "../src/config/Version.js"
import { CLI_TEST_DEADLINE_MS, cli, ROOT, server, uniqueProfile, useCliServer } from "./support/CliProcess.js"
import { freePort } from "./support/ServerProcess.js"

const SERVICE_UUID = "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10"

describe("the CLI for a newcomer", () => {
  useCliServer()

  it("npm run --silent cli -- … runs the built CLI as it is: no rebuild, nothing but the CLI's output", async () => {
    const stamp = statSync(join(ROOT, "dist", ".build-stamp")).mtimeMs
    const package_ = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"))
    const run = await new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
      const child = spawn("npm", ["run", "--silent", "cli", "--", "--version"], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] })
      let stdout = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
      child.once("error", reject)
      child.once("close", (code) => resolve({ code, stdout }))
    })
    expect({ code: run.code, stdout: run.stdout.trim() }).toEqual({ code: 0, stdout: package_.version })
    expect(statSync(join(ROOT, "dist", ".build-stamp")).mtimeMs).toBe(stamp)
    expect(package_.scripts.precli).toBeUndefined()
  }, CLI_TEST_DEADLINE_MS)

  it("takes --json and --url before the command as after it", async () => {
    const profile = uniqueProfile()
    const unreachable = `http://127.0.0.1:${await freePort()}`
    // SERVICE_AUTH_URL points nowhere: only --url, wherever it is written, reaches the server.
    const env = { SERVICE_AUTH_URL: unreachable }
    const before = await cli(["--json", "--url", server.base, "profiles", "create", profile], env)
    expect(before.code, before.stderr).toBe(0)
    expect(JSON.parse(before.stdout)).toMatchObject({ profile })
    const between = await cli(["environments", "--url=" + server.base, "--json", "create", profile, "production"], env)
    expect(between.code, between.stderr).toBe(0)
    expect(JSON.parse(between.stdout)).toMatchObject({ name: "production" })
    const after = await cli(["services", "list", profile, "production", "--json", "--url", server.base], env)
    expect(after.code, after.stderr).toBe(0)
    expect(JSON.parse(after.stdout)).toEqual({ services: [] })
    const elsewhere = await cli(["--url", unreachable, "profiles", "list"])
    expect(elsewhere.code).toBe(1)
    expect(elsewhere.stderr).toContain(`cannot reach the service-auth server at ${unreachable}: connection refused`)
    const deleted = await cli(["--json", "profiles", "delete", profile])
    expect(deleted.code, deleted.stderr).toBe(0)
  }, CLI_TEST_DEADLINE_MS)

  it("says what is wrong with a command line in one line that points to the command's --help, exit 2", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      [["credentials", "list", "acme", "production"], "Missing argument <service-uuid> (see service-auth credentials list --help)"],
      [
        ["services", "create", "acme", "production", "--nmae", "billing"],
        "Received unknown argument: '--nmae' (see service-auth services create --help)"
      ],
      [
        ["rotate", "acme", "production", SERVICE_UUID, `svc_${"0".repeat(32)}`, "--idle", "soon"],
        `--idle must be a positive duration such as 30s, 10m, 1h or 1h30m, not "soon" (see service-auth rotate --help)`
      ],
      [["--json", "services", "delete", "acme", "production", "not-a-uuid"], "(see service-auth services delete --help)"],
      [["export"], "Expected to find option: '--out' (see service-auth export --help)"],
      [["--nmae"], "(see service-auth --help)"],
      [["credentials", "rotate"], "(see service-auth credentials --help)"]
    ]
    const runs = await Promise.all(cases.map(([args]) => cli(args)))
    runs.forEach((run, index) => {
      const [args, says] = cases[index]!
      expect({ code: run.code, stdout: run.stdout }, args.join(" ")).toEqual({ code: 2, stdout: "" })
      expect(run.stderr, args.join(" ")).toMatch(/^service-auth: [^\n]+\n$/)
      expect(run.stderr, args.join(" ")).toContain(`${says}\n`)
    })
  }, CLI_TEST_DEADLINE_MS)

  it("help: the title once, optional options marked, environment variables named", async () => {
    const [create, exporting, root] = await Promise.all([
      cli(["services", "create", "--help"]),
      cli(["export", "--help"]),
      cli(["--help"])
    ])
    for (const run of [create, exporting, root]) {
      expect(run.code).toBe(0)
      expect(run.stdout.split("\n").filter((line) => line.startsWith("service-auth"))).toEqual([`service-auth ${SERVICE_VERSION}`])
      expect(run.stdout).not.toContain("can be set from environment variables")
    }
    const lines = create.stdout.split("\n")
    expect(create.stdout).toContain("[--header NAME=VARIABLE]...")
    for (const option of ["--auth-type oauth | none", "--name NAME", "--proxy URL", "--header NAME=VARIABLE...", "--url URL", "--json"]) {
      expect(lines, option).toContain(`${option} (optional)`)
    }
    expect(create.stdout).toContain("SERVICE_AUTH_URL")
    expect(create.stdout).toContain("ADMIN_TOKEN")
    // A required option is not marked.
    expect(exporting.stdout.split("\n")).toContain("--out FILE")
    // Each value named for what it is, never the placeholder `text`.
    expect(exporting.stdout).not.toMatch(/--[a-z-]+ text\b/)
    expect(exporting.stdout.split("\n")).toContain("--force (optional)")
    expect(root.stdout).toContain("[--header NAME=VARIABLE]...")
  }, CLI_TEST_DEADLINE_MS)

  it("a self-signed certificate: the failure names the code and NODE_EXTRA_CA_CERTS, which then fixes it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "service-auth-cli-tls-"))
    const [certFile, keyFile] = [join(dir, "self-signed.crt"), join(dir, "self-signed.key")]
    // dprint-ignore
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", keyFile, "-out", certFile
    ], { stdio: "ignore" })
    // Stands in for a server with TLS_CERT_FILE: what matters is the certificate it presents.
    const tls = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (_request, response) => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ profiles: [] }))
    })
    const port = await freePort()
    await new Promise<void>((resolve) => tls.listen(port, "127.0.0.1", resolve))
    try {
      const refused = await cli(["profiles", "list", "--url", `https://127.0.0.1:${port}`])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("its TLS certificate is not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)")
      expect(refused.stderr).toContain("NODE_EXTRA_CA_CERTS=/path/to/ca.pem")
      const trusted = await cli(["profiles", "list", "--json", "--url", `https://127.0.0.1:${port}`], { NODE_EXTRA_CA_CERTS: certFile })
      expect(trusted.code, trusted.stderr).toBe(0)
      expect(JSON.parse(trusted.stdout)).toEqual({ profiles: [] })
      // https:// to a port without TLS says so.
      const plain = await cli(["profiles", "list", "--url", `https://127.0.0.1:${new URL(server.base).port}`])
      expect(plain.code).toBe(1)
      expect(plain.stderr).toContain("it does not speak TLS there")
    } finally {
      tls.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, CLI_TEST_DEADLINE_MS)
})
