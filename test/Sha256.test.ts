/**
 * `sha256Base64url` is the digest the DPoP `ath`, key thumbprints, the verified-token cache and the
 * seen-jti set (whose keys PostgreSQL keeps across restarts) are computed with: the same bytes as
 * node:crypto's Hash object gives, whichever of the two Node provides.
 */
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import { sha256Base64url } from "../src/domain/Sha256.js"

describe("sha256Base64url", () => {
  it("is the base64url SHA-256 of the text's UTF-8 bytes", () => {
    // RFC 7638 §3.1's example key: its thumbprint.
    const canonical =
      "{\"e\":\"AQAB\",\"kty\":\"RSA\",\"n\":\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw\"}"
    expect(sha256Base64url(canonical)).toBe("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    for (const text of ["", "svc_0123", "scope\u0000jti", "é😀\u0000ü", "x".repeat(5_000)]) {
      expect(sha256Base64url(text), JSON.stringify(text.slice(0, 20))).toBe(createHash("sha256").update(text).digest("base64url"))
    }
    // The seen-jti key, once made by three updates, is the digest of the joined text.
    expect(sha256Base64url("scope\u0000jti")).toBe(createHash("sha256").update("scope").update("\u0000").update("jti").digest("base64url"))
  })
})
