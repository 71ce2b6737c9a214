/**
 * Public keys imported once per distinct key, for the JWTs signed by clients' keys: DPoP proofs (the
 * key travels in each proof's header) and client assertions (the key is the credential's verifier).
 *
 * Importing a JWK (`createPublicKey`) cost more than verifying the signature it checks, and a fresh
 * `KeyObject` per request also made jose convert it to a WebCrypto key each time (jose keeps that
 * conversion per `KeyObject`). Only the import is kept: every JWT's signature is still verified, on
 * every request, and nothing about a JWT is remembered here. Keys are kept by their RFC 7638 members
 * (the text their thumbprint hashes), so a proof's `kid`, `use` or member order does not make a second
 * entry; a key that fails to import is never kept. Bounded: the least recently used key goes first.
 */
import { Either } from "effect"
import type { KeyObject } from "node:crypto"
import { canonicalJwk, importPublicKey, type KeyMembers, thumbprintOf } from "../domain/KeyCredential.js"

/** How many keys a cache keeps by default. */
export const IMPORTED_KEYS_MAX = 10_000

/** A map that keeps at most `capacity` entries, forgetting the least recently used one first. */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>()
  constructor(readonly capacity: number) {}

  get size(): number {
    return this.entries.size
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key)
    if (value !== undefined) {
      // Moved to the end: the Map's order is the order of use.
      this.entries.delete(key)
      this.entries.set(key, value)
    }
    return value
  }

  set(key: K, value: V): void {
    this.entries.delete(key)
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, value)
  }
}

export interface ImportedKey {
  readonly key: KeyObject
  /** The key's RFC 7638 thumbprint. */
  readonly thumbprint: string
}

/** `importPublicKey` with its result kept per key (its refusals are not kept). */
export const importedKeys = (capacity: number = IMPORTED_KEYS_MAX) => {
  const cache = new LruCache<string, ImportedKey>(capacity)
  const of = (members: KeyMembers): Either.Either<ImportedKey, string> => {
    const canonical = canonicalJwk(members)
    const cached = cache.get(canonical)
    if (cached !== undefined) return Either.right(cached)
    return Either.map(importPublicKey(members), (key) => {
      const entry = { key, thumbprint: thumbprintOf(canonical) }
      cache.set(canonical, entry)
      return entry
    })
  }
  return {
    of,
    get size() {
      return cache.size
    }
  }
}

export type ImportedKeys = ReturnType<typeof importedKeys>
