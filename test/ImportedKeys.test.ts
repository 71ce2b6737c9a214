/**
 * The imported public keys kept for DPoP proofs and client assertions (`ImportedKeys`): one import
 * per distinct key, whatever its `kid`, bounded with the least recently used key going first, never
 * a key that failed to import; and the thumbprint kept is the key's RFC 7638 thumbprint.
 */
import { describe, expect, it } from "vitest"
import { Either } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { keyCache } from "../src/token/ClientAssertion.js"
import { importedKeys, LruCache } from "../src/keys/ImportedKeys.js"
import { jwkThumbprint, keyVerifier, type KeyMembers, parsePublicJwk, publicJwkMembers } from "../src/domain/KeyCredential.js"

const ecKey = (): KeyMembers => {
  const jwk = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" })
  return { kty: "EC", crv: "P-256", x: jwk.x!, y: jwk.y! }
}

describe("LruCache", () => {
  it("keeps at most its capacity, forgetting the least recently used entry first", () => {
    const cache = new LruCache<string, number>(3)
    cache.set("a", 1)
    cache.set("b", 2)
    cache.set("c", 3)
    expect(cache.get("a")).toBe(1) // a is now the most recently used
    cache.set("d", 4)
    expect(cache.size).toBe(3)
    expect(cache.get("b")).toBeUndefined()
    expect([cache.get("a"), cache.get("c"), cache.get("d")]).toEqual([1, 3, 4])
    cache.set("a", 5) // a key set again is not a second entry
    expect(cache.size).toBe(3)
    expect(cache.get("a")).toBe(5)
  })
})

describe("importedKeys", () => {
  it("imports a key once, whatever its kid, and keeps its RFC 7638 thumbprint", () => {
    const keys = importedKeys(10)
    const members = ecKey()
    const first = Either.getOrThrow(keys.of(members))
    const again = Either.getOrThrow(keys.of(Either.getOrThrow(publicJwkMembers({ ...members, kid: "another" })).members))
    expect(again.key).toBe(first.key)
    expect(keys.size).toBe(1)
    expect(first.thumbprint).toBe(jwkThumbprint(members))
    expect(first.key.asymmetricKeyType).toBe("ec")
  })

  it("is bounded: beyond its capacity the least recently used key goes, and is imported again when it comes back", () => {
    const keys = importedKeys(3)
    const [a, b, c, d] = [ecKey(), ecKey(), ecKey(), ecKey()]
    const keyA = Either.getOrThrow(keys.of(a)).key
    keys.of(b)
    keys.of(c)
    expect(Either.getOrThrow(keys.of(a)).key).toBe(keyA)
    keys.of(d) // b, the least recently used, goes
    expect(keys.size).toBe(3)
    expect(Either.getOrThrow(keys.of(a)).key).toBe(keyA)
    const keyB = Either.getOrThrow(keys.of(b)).key
    expect(Either.getOrThrow(keys.of(b)).key).toBe(keyB)
    expect(keys.size).toBe(3)
  })

  it("keeps no key that fails to import, and refuses it as parsePublicJwk does", () => {
    const keys = importedKeys(10)
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" })
    const rsa: KeyMembers = { kty: "RSA", n: small.n!, e: small.e! }
    expect(keys.of(rsa)).toEqual(Either.left("public_key must be an RSA key of at least 2048 bits"))
    expect(parsePublicJwk(rsa)).toEqual(Either.left("public_key must be an RSA key of at least 2048 bits"))
    const notOnCurve: KeyMembers = { kty: "EC", crv: "P-256", x: "AAAA", y: "AAAA" }
    expect(keys.of(notOnCurve)).toEqual(Either.left("public_key is not a valid public key"))
    expect(keys.size).toBe(0)
  })
})

describe("keyCache (client assertions)", () => {
  it("imports a credential's key once and is bounded", () => {
    const keyOf = keyCache(2)
    const verifiers = [ecKey(), ecKey(), ecKey()].map((members) => keyVerifier(Either.getOrThrow(parsePublicJwk(members))))
    const first = keyOf(verifiers[0]!)!
    expect(keyOf(verifiers[0]!)!.key).toBe(first.key)
    keyOf(verifiers[1]!)
    keyOf(verifiers[2]!) // the first, least recently used, goes
    expect(keyOf(verifiers[0]!)!.key).not.toBe(first.key)
    expect(keyOf("0".repeat(64))).toBeUndefined()
  })
})
