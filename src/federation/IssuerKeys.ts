/**
 * A trusted issuer's public keys: inline (its `jwks`), or fetched through OIDC discovery
 * (`{issuer}/.well-known/openid-configuration`, whose `issuer` must be the issuer's URL exactly,
 * then its `jwks_uri`). Both URLs must be `https:` (plain `http:` only on a loopback host and only
 * for an issuer with `allow_insecure_loopback`); redirects are not followed; each fetch is bounded
 * by `FETCH_TIMEOUT_MS` and `DOCUMENT_MAX_BYTES`.
 *
 * Fetched keys are kept for the JWKS answer's `Cache-Control: max-age`, clamped to
 * `KEYS_MIN_CACHE_SECONDS`..`KEYS_MAX_CACHE_SECONDS` (`KEYS_DEFAULT_CACHE_SECONDS` without one).
 * A token whose `kid` is unknown makes one refetch, at most once every `UNKNOWN_KID_REFETCH_SECONDS`
 * per issuer (a key rotated in at the issuer is found at once; a stream of made-up kids costs the
 * issuer one request per interval). When a refetch fails (the issuer is down), the last good keys
 * stay in use up to `STALE_KEYS_GRACE_SECONDS` after they were due to be refetched, then nothing
 * verifies until the issuer answers again. At most `ISSUERS_CACHED_MAX` issuers' keys are held (the
 * least recently used go first), each of at most `JWKS_MAX_KEYS` keys: memory is bounded.
 *
 * Keys are held under the issuer's name, URL and loopback setting: a replaced issuer fetches anew.
 */
import { Context, Effect, Either, Layer } from "effect"
import { createLocalJWKSet, type JWK, type JWTVerifyGetKey } from "jose"
import { parsePublicJwk } from "../domain/KeyCredential.js"
import { issuerUrlProblem, JWKS_MAX_KEYS, type TrustedIssuer } from "../domain/TrustedIssuers.js"
import { LruCache } from "../keys/ImportedKeys.js"

export const FETCH_TIMEOUT_MS = 5_000
export const DOCUMENT_MAX_BYTES = 256 * 1024
export const KEYS_MIN_CACHE_SECONDS = 60
export const KEYS_MAX_CACHE_SECONDS = 86_400
export const KEYS_DEFAULT_CACHE_SECONDS = 300
export const UNKNOWN_KID_REFETCH_SECONDS = 10
export const STALE_KEYS_GRACE_SECONDS = 86_400
export const ISSUERS_CACHED_MAX = 1_000

/** Keys that verify: jose's key resolver over them (`createLocalJWKSet`). */
export interface IssuerKeySet {
  readonly getKey: JWTVerifyGetKey
  readonly kids: ReadonlySet<string>
}

interface Held {
  readonly set: IssuerKeySet
  /** When they are due to be refetched. */
  readonly freshUntil: number
}

interface Entry {
  held: Held | undefined
  lastUnknownKidRefetch: number
  inflight: Promise<Either.Either<Held, string>> | undefined
}

/** A JWKS's usable keys: public RSA, EC P-256 or Ed25519 signing keys, each checked as a key credential's. */
export const keySetOf = (jwks: unknown): Either.Either<IssuerKeySet, string> => {
  const keys = typeof jwks === "object" && jwks !== null ? (jwks as { keys?: unknown }).keys : undefined
  if (!Array.isArray(keys)) return Either.left("the JWKS has no keys array")
  if (keys.length > JWKS_MAX_KEYS) return Either.left(`the JWKS has more than ${JWKS_MAX_KEYS} keys`)
  const usable: Array<JWK> = []
  for (const key of keys) {
    const parsed = parsePublicJwk(key)
    if (Either.isLeft(parsed)) continue
    const alg = (key as { alg?: unknown }).alg
    usable.push({ ...parsed.right, ...(typeof alg === "string" ? { alg } : {}) } as JWK)
  }
  if (usable.length === 0) return Either.left("the JWKS holds no usable public signing key")
  return Either.right({ getKey: createLocalJWKSet({ keys: usable }), kids: new Set(usable.map((key) => key.kid!)) })
}

/** Reads a URL's JSON answer, bounded in time and size; Left says what went wrong (never a body). */
const fetchJson = async (url: string): Promise<Either.Either<{ readonly json: unknown; readonly maxAge: number | undefined }, string>> => {
  try {
    const response = await fetch(url, {
      redirect: "error",
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      headers: { accept: "application/json" }
    })
    if (response.status !== 200) {
      await response.body?.cancel()
      return Either.left(`${url} answered ${response.status}`)
    }
    const declared = Number(response.headers.get("content-length") ?? "0")
    if (declared > DOCUMENT_MAX_BYTES) {
      await response.body?.cancel()
      return Either.left(`${url} answered more than ${DOCUMENT_MAX_BYTES} bytes`)
    }
    const chunks: Array<Uint8Array> = []
    let size = 0
    const reader = response.body?.getReader()
    while (reader !== undefined) {
      const { done, value } = await reader.read()
      if (done) break
      size += value.byteLength
      if (size > DOCUMENT_MAX_BYTES) {
        await reader.cancel()
        return Either.left(`${url} answered more than ${DOCUMENT_MAX_BYTES} bytes`)
      }
      chunks.push(value)
    }
    const json: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    const cacheControl = response.headers.get("cache-control") ?? ""
    const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl)?.[1]
    const noCache = /(?:^|,)\s*(no-store|no-cache)\b/i.test(cacheControl)
    return Either.right({ json, maxAge: noCache ? 0 : maxAge === undefined ? undefined : Number(maxAge) })
  } catch (error) {
    return Either.left(`${url} could not be read (${error instanceof Error ? error.name : "error"})`)
  }
}

/** The issuer's keys through its discovery document, with how long they may be kept (seconds). */
const discover = async (issuer: TrustedIssuer): Promise<Either.Either<{ readonly set: IssuerKeySet; readonly maxAge: number }, string>> => {
  const allow = issuer.allow_insecure_loopback
  const urlProblem = issuerUrlProblem(issuer.issuer, allow, "the issuer")
  if (urlProblem !== undefined) return Either.left(urlProblem)
  const discovery = await fetchJson(`${issuer.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`)
  if (Either.isLeft(discovery)) return Either.left(discovery.left)
  const document = discovery.right.json as { issuer?: unknown; jwks_uri?: unknown } | null
  if (typeof document !== "object" || document === null) return Either.left("the discovery document is not a JSON object")
  if (document.issuer !== issuer.issuer) return Either.left("the discovery document's issuer is not the issuer's URL")
  if (typeof document.jwks_uri !== "string") return Either.left("the discovery document has no jwks_uri")
  const jwksProblem = issuerUrlProblem(document.jwks_uri, allow, "the jwks_uri")
  if (jwksProblem !== undefined) return Either.left(jwksProblem)
  const jwks = await fetchJson(document.jwks_uri)
  if (Either.isLeft(jwks)) return Either.left(jwks.left)
  const maxAge = Math.min(KEYS_MAX_CACHE_SECONDS, Math.max(KEYS_MIN_CACHE_SECONDS, jwks.right.maxAge ?? KEYS_DEFAULT_CACHE_SECONDS))
  return Either.map(keySetOf(jwks.right.json), (set) => ({ set, maxAge }))
}

export interface IssuerKeysShape {
  /** The keys to verify the issuer's tokens with now, or why there are none. */
  readonly keysFor: (issuer: TrustedIssuer, nowMillis: number) => Effect.Effect<Either.Either<IssuerKeySet, string>>
  /**
   * For a token whose key is not among `keysFor`'s: the keys fetched once more, when the issuer's
   * last such refetch is at least `UNKNOWN_KID_REFETCH_SECONDS` old; undefined when it is not, or
   * for inline keys (nothing to refetch).
   */
  readonly refetchForUnknownKey: (
    issuer: TrustedIssuer,
    nowMillis: number
  ) => Effect.Effect<Either.Either<IssuerKeySet, string> | undefined>
}

export class IssuerKeys extends Context.Tag("service-auth/IssuerKeys")<IssuerKeys, IssuerKeysShape>() {
  static readonly layer = Layer.sync(IssuerKeys, () => {
    const entries = new LruCache<string, Entry>(ISSUERS_CACHED_MAX)
    const inline = new LruCache<string, Either.Either<IssuerKeySet, string>>(ISSUERS_CACHED_MAX)
    const keyOf = (issuer: TrustedIssuer) => JSON.stringify([issuer.name, issuer.issuer, issuer.allow_insecure_loopback])
    const entryOf = (issuer: TrustedIssuer): Entry => {
      const key = keyOf(issuer)
      const found = entries.get(key)
      if (found !== undefined) return found
      const made: Entry = { held: undefined, lastUnknownKidRefetch: Number.NEGATIVE_INFINITY, inflight: undefined }
      entries.set(key, made)
      return made
    }
    const inlineKeys = (jwks: unknown) => {
      const text = JSON.stringify(jwks)
      const found = inline.get(text)
      if (found !== undefined) return found
      const made = keySetOf(jwks)
      inline.set(text, made)
      return made
    }

    /** One fetch at a time per issuer; a failure keeps the last good keys until their grace ends. */
    const refresh = (issuer: TrustedIssuer, entry: Entry, nowMillis: number): Promise<Either.Either<IssuerKeySet, string>> => {
      const inflight = entry.inflight ?? discover(issuer).then((fetched): Either.Either<Held, string> => {
        entry.inflight = undefined
        if (Either.isLeft(fetched)) return Either.left(fetched.left)
        entry.held = { set: fetched.right.set, freshUntil: nowMillis + fetched.right.maxAge * 1000 }
        return Either.right(entry.held)
      })
      entry.inflight = inflight
      return inflight.then((outcome) => {
        if (Either.isRight(outcome)) return Either.right(outcome.right.set)
        const held = entry.held
        if (held !== undefined && nowMillis <= held.freshUntil + STALE_KEYS_GRACE_SECONDS * 1000) return Either.right(held.set)
        return Either.left(`the issuer's keys could not be fetched: ${outcome.left}`)
      })
    }

    return IssuerKeys.of({
      keysFor: (issuer, nowMillis) =>
        Effect.promise(() => {
          if (issuer.jwks !== null) return Promise.resolve(inlineKeys(issuer.jwks))
          const entry = entryOf(issuer)
          if (entry.held !== undefined && nowMillis < entry.held.freshUntil) return Promise.resolve(Either.right(entry.held.set))
          return refresh(issuer, entry, nowMillis)
        }),
      refetchForUnknownKey: (issuer, nowMillis) =>
        Effect.promise(() => {
          if (issuer.jwks !== null) return Promise.resolve(undefined)
          const entry = entryOf(issuer)
          if (nowMillis - entry.lastUnknownKidRefetch < UNKNOWN_KID_REFETCH_SECONDS * 1000) return Promise.resolve(undefined)
          entry.lastUnknownKidRefetch = nowMillis
          return refresh(issuer, entry, nowMillis)
        })
    })
  })
}
