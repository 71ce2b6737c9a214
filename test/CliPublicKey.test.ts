/**
 * `service-auth credentials add --public-key FILE`: a key credential from a JWK or PEM
 * file, through the built CLI against a real server; a private key file, a weak key and a time
 * outside RFC 3339 are refused before they travel.
 */
import { describe, expect, it } from "vitest"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { generateKeyPairSync } from "node:crypto"
import { exportJWK, exportPKCS8, exportSPKI, generateKeyPair } from "jose"
import { CLI_TEST_DEADLINE_MS, cli, cliJson, uniqueProfile, useCliServer } from "./support/CliProcess.js"

describe("service-auth credentials add --public-key", () => {
  useCliServer()

  it("adds key credentials from JWK and PEM files, and refuses a private key", async () => {
    const profile = uniqueProfile()
    const dir = mkdtempSync(join(tmpdir(), "service-auth-keys-"))
    await cliJson(["profiles", "create", profile])
    await cliJson(["environments", "create", profile, "production"])
    const service = await cliJson(["services", "create", profile, "production", "--auth-type", "oauth"])
    const target = [profile, "production", service.uuid]

    const ec = await generateKeyPair("ES256", { extractable: true })
    writeFileSync(join(dir, "ec.jwk"), JSON.stringify(await exportJWK(ec.publicKey)))
    const fromJwk = await cli(["credentials", "add", ...target, "--public-key", join(dir, "ec.jwk")])
    expect(fromJwk.code, fromJwk.stderr).toBe(0)
    expect(fromJwk.stdout).toMatch(/^client_id +svc_[0-9a-f]{32}$/m)
    expect(fromJwk.stdout).toMatch(/^key +EC \S+$/m)
    expect(fromJwk.stdout).not.toMatch(/client_secret/)

    const rsa = await generateKeyPair("RS256", { extractable: true })
    writeFileSync(join(dir, "rsa.pem"), await exportSPKI(rsa.publicKey))
    const fromPem = await cliJson(["credentials", "add", ...target, "--public-key", join(dir, "rsa.pem")])
    expect(fromPem).toEqual({
      client_id: expect.stringMatching(/^svc_/),
      created_at: expect.any(String),
      public_key: { kty: "RSA", kid: expect.any(String), thumbprint: expect.any(String) },
      token_endpoint_auth_method: "private_key_jwt"
    })

    writeFileSync(join(dir, "private.pem"), await exportPKCS8(rsa.privateKey))
    const refused = await cli(["credentials", "add", ...target, "--public-key", join(dir, "private.pem")])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("private key")

    // A weak key is refused before it travels, in the server's words; so is a time outside RFC 3339.
    const { n } = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ format: "jwk" }) as { n: string }
    writeFileSync(join(dir, "weak.jwk"), JSON.stringify({ kty: "RSA", n, e: "AQ" }))
    const weak = await cli(["credentials", "add", ...target, "--public-key", join(dir, "weak.jwk")])
    expect(weak.code).not.toBe(0)
    expect(weak.stderr).toContain("public_key.e must be AQAB (the public exponent 65537)")
    const dateOnly = await cli(["credentials", "add", ...target, "--expires-at", "2030-01-01"])
    expect(dateOnly.code).toBe(2)
    expect(dateOnly.stderr).toContain("--expires-at must be an RFC 3339 date-time with an offset and a four-digit year")
  }, CLI_TEST_DEADLINE_MS)
})
