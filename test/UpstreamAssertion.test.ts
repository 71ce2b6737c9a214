/**
 * The gateway's assertion cache (`UpstreamAssertion`): reused per service, caller and upstream URL
 * for up to a minute, made anew when the signing key changes, never shared between callers, and one
 * signature for concurrent misses; and what they say of the call (service, caller, whether one was
 * verified).
 */
import { describe, expect, it } from "vitest"
import * as Jose from "jose"
import { generateKeyPairSync } from "node:crypto"
import { makeUpstreamAssertions, REUSE_SECONDS } from "../src/service-call/proxy/UpstreamAssertion.js"

const signingKey = async (kid: string) => {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  return {
    kid,
    encodedHeader: Buffer.from(JSON.stringify({ alg: "RS256", typ: "JWT", kid })).toString("base64url"),
    privateKey: await crypto.subtle.importKey(
      "pkcs8",
      new Uint8Array(privateKey.export({ type: "pkcs8", format: "der" })),
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["sign"]
    ),
    publicKey
  }
}

const subject = {
  profile: "acme",
  environment: "production",
  uuid: "0b5e4c1a-0000-4000-8000-000000000001",
  clientId: "svc_00000000000000000000000000000001",
  audience: "https://upstream.example/orders"
}

describe("upstream assertions", () => {
  it("are reused within the window, made anew after it, on a new signing key, and per caller", async () => {
    const first = await signingKey("first")
    const second = await signingKey("second")
    let current = first
    let ids = 0
    const assertions = makeUpstreamAssertions({
      issuer: "https://auth.example",
      signingKeyAt: () => current,
      randomId: () => `id-${++ids}`
    })
    const t0 = 1_800_000_000_000
    const [a, b] = await Promise.all([assertions.assertionAt(subject, t0), assertions.assertionAt(subject, t0)])
    expect(a).toBe(b)
    expect(ids).toBe(1)
    expect(await assertions.assertionAt(subject, t0 + REUSE_SECONDS * 1000 - 1)).toBe(a)
    const later = await assertions.assertionAt(subject, t0 + REUSE_SECONDS * 1000)
    expect(later).not.toBe(a)
    const other = await assertions.assertionAt({ ...subject, clientId: "svc_00000000000000000000000000000002" }, t0)
    expect(Jose.decodeJwt(other).sub).toBe("svc_00000000000000000000000000000002")

    current = second
    const rotated = await assertions.assertionAt(subject, t0 + REUSE_SECONDS * 1000 + 1)
    expect(Jose.decodeProtectedHeader(rotated).kid).toBe("second")
    const { payload } = await Jose.jwtVerify(rotated, second.publicKey, {
      issuer: "https://auth.example",
      audience: subject.audience,
      algorithms: ["RS256"],
      currentDate: new Date(t0 + REUSE_SECONDS * 1000 + 1)
    })
    expect(payload).toMatchObject({
      sub: subject.clientId,
      data: { service_uuid: subject.uuid, profile: "acme", environment: "production" },
      client_authenticated: true
    })
    expect(payload.exp! - payload.iat!).toBe(300)
  })

  it("say whether a verified client made the call: a service without OAuth has no subject and false", async () => {
    const key = await signingKey("only")
    const assertions = makeUpstreamAssertions({ issuer: "https://auth.example", signingKeyAt: () => key, randomId: () => "id" })
    const t0 = 1_800_000_000_000
    const open = await assertions.assertionAt({ ...subject, clientId: null }, t0)
    const authenticated = await assertions.assertionAt(subject, t0)
    expect(open).not.toBe(authenticated)
    const claimsOf = async (token: string) =>
      (await Jose.jwtVerify(token, key.publicKey, { audience: subject.audience, currentDate: new Date(t0) })).payload
    const openClaims = await claimsOf(open)
    expect(openClaims).not.toHaveProperty("sub")
    expect(openClaims).toMatchObject({
      client_authenticated: false,
      data: { service_uuid: subject.uuid, profile: "acme", environment: "production" }
    })
    expect(Object.keys(openClaims).sort()).toEqual(["aud", "client_authenticated", "data", "exp", "iat", "iss", "jti"])
    expect((await claimsOf(authenticated)).client_authenticated).toBe(true)
  })
})
