/**
 * A public key pasted into the editor (src/web/admin/assets/editor-keys.js), without a browser: a
 * JWK is taken as it is (private members refused), a PEM public key becomes a JWK through
 * WebCrypto (RSA, EC P-256, Ed25519), a private key or anything else is refused in words. The
 * staged key credential is saved as `add_key_credential` with its `public_key`.
 */
import { generateKeyPairSync } from "node:crypto"
import { describe, expect, test } from "vitest"
import { emptyChanges, normalizeDoc, projectedCount, saveRequest, stageAdd } from "../src/web/admin/assets/editor-changes.js"
import { pastedPublicKey } from "../src/web/admin/assets/editor-keys.js"

const UUID = "6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7"

const pair = (kind: "rsa" | "ec" | "ed25519") =>
  kind === "rsa"
    ? generateKeyPairSync("rsa", { modulusLength: 2048 })
    : kind === "ec"
    ? generateKeyPairSync("ec", { namedCurve: "P-256" })
    : generateKeyPairSync("ed25519")

describe("a pasted public key", () => {
  test("a PEM public key becomes the JWK of its public members, for each key type", async () => {
    for (
      const [kind, label, members] of [
        ["rsa", "RSA", ["kty", "n", "e"]],
        ["ec", "EC P-256", ["kty", "crv", "x", "y"]],
        ["ed25519", "Ed25519", ["kty", "crv", "x"]]
      ] as const
    ) {
      const { publicKey } = pair(kind)
      const pem = publicKey.export({ type: "spki", format: "pem" }).toString()
      const pasted = await pastedPublicKey(`\n  ${pem}  \n`)
      const expected = publicKey.export({ format: "jwk" })
      expect({ kind, label: pasted.label, key: pasted.publicKey }).toEqual({
        kind,
        label,
        key: Object.fromEntries(members.map((member) => [member, expected[member as keyof typeof expected]]))
      })
    }
  })

  test("a JWK is taken as it is, with its kid in the label", async () => {
    const jwk = { ...pair("ec").publicKey.export({ format: "jwk" }), kid: "laptop-2026" }
    expect(await pastedPublicKey(JSON.stringify(jwk, null, 2))).toEqual({ publicKey: jwk, label: "EC P-256, kid laptop-2026" })
  })

  test("private keys and anything else are refused in words", async () => {
    const { privateKey } = pair("ec")
    const cases: Record<string, string | RegExp> = {
      "": /^Paste a public key/,
      [privateKey.export({ type: "pkcs8", format: "pem" }).toString()]: /^This is a private key/,
      [JSON.stringify(privateKey.export({ format: "jwk" }))]: "This JWK holds private members (d): paste the public key only.",
      "{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}": "This JWK holds private members (k): paste the public key only.",
      "{\"kty\":\"XYZ\"}": /^A key credential is an RSA, EC P-256 or Ed25519 public key/,
      "{not json": /^This is not valid JSON/,
      "[1,2]": /^The public key must be a JWK/,
      "-----BEGIN PUBLIC KEY-----\n!!!\n-----END PUBLIC KEY-----": /^The PEM's body is not base64/,
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----": /^The public key must be a JWK/,
      "ssh-ed25519 AAAA": /^The public key must be a JWK/
    }
    for (const [text, message] of Object.entries(cases)) {
      const pasted = await pastedPublicKey(text)
      expect(pasted.publicKey).toBeUndefined()
      if (typeof message === "string") expect(pasted.error).toBe(message)
      else expect(pasted.error).toMatch(message)
    }
  })

  test("a PEM the browser cannot read as any key type is sent as it is, for the server to judge", async () => {
    const pem = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"
    expect(await pastedPublicKey(pem)).toEqual({ publicKey: pem, label: "PEM public key" })
  })
})

describe("a staged key credential", () => {
  test("counts toward the limit, and is saved as add_key_credential with its public_key", () => {
    const doc = normalizeDoc({ profile: "acme", environments: [{ name: "prod", services: [{ uuid: UUID, credentials: [] }] }] }, "acme")
    const service = doc.environments[0]!.services[0]!
    const jwk = { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }
    const staged = stageAdd(emptyChanges("acme"), "prod", service, { publicKey: jwk, label: "Ed25519" })!
    expect(staged.add).toMatchObject({ public_key: jwk, key_label: "Ed25519" })
    const both = stageAdd(staged.changes, "prod", service)!
    expect(projectedCount(both.changes, "prod", service)).toBe(2)
    expect(stageAdd(both.changes, "prod", service, { publicKey: jwk, label: "Ed25519" })).toBeNull()
    expect(saveRequest(both.changes).changes).toEqual([
      { op: "add_key_credential", environment: "prod", service_uuid: UUID, public_key: jwk },
      { op: "add_credential", environment: "prod", service_uuid: UUID }
    ])
    const expiring = stageAdd(emptyChanges("acme"), "prod", service, { publicKey: jwk, label: "Ed25519" })!
    const withExpiry = { ...expiring.changes, adds: [{ ...expiring.add, expires_at: "2027-01-01T00:00:00.000Z" }] }
    expect(saveRequest(withExpiry).changes).toEqual([
      { op: "add_key_credential", environment: "prod", service_uuid: UUID, public_key: jwk, expires_at: "2027-01-01T00:00:00.000Z" }
    ])
  })

  test("a listed key credential keeps its public key's type, kid and thumbprint", () => {
    const publicKey = { kty: "EC", kid: "k1", thumbprint: "abc" }
    const doc = normalizeDoc({
      environments: [{
        name: "prod",
        services: [{ uuid: UUID, credentials: [{ client_id: "svc_a", public_key: publicKey }, { client_id: "svc_b" }] }]
      }]
    }, "acme")
    const [key, secret] = doc.environments[0]!.services[0]!.credentials
    expect(key!.public_key).toEqual(publicKey)
    expect(secret).not.toHaveProperty("public_key")
  })
})
