/**
 * The profile editor's workload identity federation helpers (src/web/admin/assets/editor-issuers.js):
 * a pure module the page imports as it is, tested here without a browser. What it sends is checked
 * against the admin API's own schemas, so the form cannot drift from the contract.
 */
import { Schema } from "effect"
import { describe, expect, test } from "vitest"
import { FederatedCredentialInput } from "../src/domain/FederatedCredentialBodies.js"
import { FEDERATED_CLAIMS_MAX } from "../src/domain/Limits.js"
import { NewTrustedIssuer } from "../src/federation/TrustedIssuersApi.js"
import { claimsOf, claimsText, federatedInfo, issuerBody, pastedJwks, profileNames } from "../src/web/admin/assets/editor-issuers.js"

const fields = {
  issuer: " https://oidc.example.com ",
  keys: "discovery" as const,
  jwks: "",
  audience: "",
  algorithms: ["RS256", "ES256", "EdDSA"],
  maxLifetime: "",
  profiles: "acme, beta",
  allowInsecureLoopback: false
}

const isNewIssuer = Schema.is(NewTrustedIssuer)
const isCredentialInput = Schema.is(FederatedCredentialInput)

describe("a trusted issuer's form", () => {
  test("left with its defaults, sends only what the server has no default for", () => {
    const made = issuerBody(fields)
    expect(made).toEqual({
      body: { issuer: "https://oidc.example.com", algorithms: ["RS256", "ES256", "EdDSA"], profiles: ["acme", "beta"] }
    })
    expect(isNewIssuer({ name: "prod-cluster", ...made.body })).toBe(true)
  })

  test("filled in whole, sends every field, algorithms in the server's order", () => {
    const jwks = { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", kid: "k1" }] }
    const made = issuerBody({
      ...fields,
      issuer: "http://127.0.0.1:8080/cluster",
      keys: "inline",
      jwks: JSON.stringify(jwks),
      audience: " https://auth.example.com ",
      algorithms: ["EdDSA", "ES256"],
      maxLifetime: "600",
      profiles: "acme acme,,beta",
      allowInsecureLoopback: true
    })
    expect(made.body).toEqual({
      issuer: "http://127.0.0.1:8080/cluster",
      jwks,
      audience: "https://auth.example.com",
      algorithms: ["ES256", "EdDSA"],
      max_token_lifetime_seconds: 600,
      profiles: ["acme", "beta"],
      allow_insecure_loopback: true
    })
    expect(isNewIssuer({ name: "local", ...made.body })).toBe(true)
  })

  test("names the field at fault", () => {
    expect(issuerBody({ ...fields, issuer: "  " })).toMatchObject({ field: "issuer" })
    expect(issuerBody({ ...fields, keys: "inline", jwks: "{not json" })).toMatchObject({
      field: "jwks",
      error: expect.stringMatching(/not valid JSON/)
    })
    expect(issuerBody({ ...fields, algorithms: [] })).toEqual({ field: "algorithms", error: "Accept at least one algorithm." })
    for (const lifetime of ["0", "1.5", "604801", "soon"]) {
      expect(issuerBody({ ...fields, maxLifetime: lifetime })).toMatchObject({ field: "maxLifetime" })
    }
    expect(issuerBody({ ...fields, maxLifetime: "604800" }).body?.max_token_lifetime_seconds).toBe(604800)
  })

  test("a pasted JWKS: a set, or one key taken as a set of one; nothing else", () => {
    const key = { kty: "RSA", n: "n", e: "AQAB" }
    expect(pastedJwks(JSON.stringify({ keys: [key] }))).toEqual({ jwks: { keys: [key] } })
    expect(pastedJwks(JSON.stringify(key))).toEqual({ jwks: { keys: [key] } })
    expect(pastedJwks("{\"keys\": []}")).toEqual({ error: "The JWKS holds no key." })
    expect(pastedJwks("[1]").error).toMatch(/"keys" array/)
  })

  test("profile names, separated by commas or spaces, each once", () => {
    expect(profileNames(" a,b  c,,a ")).toEqual(["a", "b", "c"])
    expect(profileNames("")).toEqual([])
  })
})

describe("a federated credential's form", () => {
  test("claim rows: empty rows skipped, half-filled or twice-named ones refused", () => {
    expect(claimsOf([])).toEqual({ claims: undefined })
    expect(claimsOf([{ name: "", value: "" }])).toEqual({ claims: undefined })
    const claims = claimsOf([{ name: " repository ", value: "acme/billing" }, { name: "environment", value: "production" }]).claims
    expect(claims).toEqual({ repository: "acme/billing", environment: "production" })
    expect(isCredentialInput({ issuer: "gh", subject: "repo:acme/billing:environment:production", claims })).toBe(true)
    expect(claimsOf([{ name: "", value: "x" }]).error).toMatch(/needs a name/)
    expect(claimsOf([{ name: "ref", value: "" }]).error).toMatch(/Claim ref needs a value/)
    expect(claimsOf([{ name: "a", value: "1" }, { name: "a", value: "2" }]).error).toBe("Claim a is named twice.")
    const many = Array.from({ length: FEDERATED_CLAIMS_MAX + 1 }, (_, i) => ({ name: `c${i}`, value: "v" }))
    expect(claimsOf(many).error).toBe(`A credential may require at most ${FEDERATED_CLAIMS_MAX} claims.`)
  })

  test("a listed credential's identity is kept, and said in words", () => {
    expect(federatedInfo({ issuer: "gh", subject: "s", claims: { b: "2", a: "1" } })).toEqual({
      federated: { issuer: "gh", subject: "s", claims: { b: "2", a: "1" } }
    })
    expect(federatedInfo({ issuer: "gh" })).toBeUndefined()
    expect(federatedInfo(undefined)).toBeUndefined()
    expect(claimsText({ issuer: "gh", subject: "s", claims: { repository: "acme/billing", environment: "prod" } })).toBe(
      "repository = acme/billing · environment = prod"
    )
    expect(claimsText({ issuer: "gh", subject: "s" })).toBe("")
  })
})
