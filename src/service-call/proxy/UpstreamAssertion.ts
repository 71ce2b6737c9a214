/**
 * `X-Service-Auth-Assertion`: a JWT by which an upstream proves a call came through this gateway,
 * for this service and this caller. RS256 with the current signing key (its `kid` in the JWKS),
 * claims `iss`, `aud` (the upstream URL as configured), `sub` (the caller's client id; absent for a
 * service without OAuth), `data` {service_uuid, profile, environment}, `client_authenticated` (true
 * when a verified client made the call, false for a service without OAuth), `iat`, `exp` = `iat` +
 * 300, `jti`.
 *
 * `aud` is whatever URL the service's writer typed, so it cannot tell an upstream which service a
 * call came through: `data` can, and `client_authenticated` says whether anyone had to authenticate.
 * An upstream pins both (docs/integrators.md), or a service of another profile pointed at its URL
 * reaches it with an assertion that verifies.
 *
 * An RSA signature per call would cost more than the proxying itself, so an assertion is reused for
 * REUSE_SECONDS per (service, caller, upstream URL), well within its lifetime, and made anew when the
 * signing key changes. Reused assertions share their `jti` (docs/integrators.md: it names an
 * assertion, not a call). At most MAX_ASSERTIONS are held; one more evicts the oldest.
 */
import { ExpiringEntries } from "../../domain/ExpiringEntries.js"
import type { SigningKey } from "../../keys/SigningKeyMaterial.js"

export const ASSERTION_LIFETIME_SECONDS = 300
export const REUSE_SECONDS = 60
/**
 * Assertions held at most: about 1.3 KB each with a signed assertion of an RSA-2048 key and its
 * id (docs/performance.md), 13 MB at most. One leaves by itself once it may no longer be reused.
 */
export const MAX_ASSERTIONS = 10_000

export interface AssertionSubject {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
  /** The verified caller's client id; null for a service without OAuth. */
  readonly clientId: string | null
  /** The upstream URL as configured: the assertion's audience. */
  readonly audience: string
}

interface HeldAssertion {
  readonly token: string
  readonly kid: string
  readonly reuseUntil: number
}

/**
 * The text an assertion is held by: one per (service, caller, upstream URL). A caller that keeps it
 * (`UpstreamGateway`, per stored handler and caller) spares the lookup the hashing of a new text.
 */
export const assertionIdOf = (subject: AssertionSubject): string =>
  `${subject.profile}/${subject.environment}/${subject.uuid}\u0000${subject.clientId ?? ""}\u0000${subject.audience}`

export interface UpstreamAssertionsShape {
  /**
   * The assertion for this call: a held one when still good, else a new one (signed off the event
   * loop). `id` is `assertionIdOf(subject)`, given when the caller keeps it.
   */
  readonly assertionAt: (subject: AssertionSubject, nowMillis: number, id?: string) => string | Promise<string>
  /** Drops the assertions that may no longer be reused. */
  readonly sweep: (nowMillis: number) => number
  /** Assertions held now (for tests of the bound). */
  readonly size: () => number
}

export const makeUpstreamAssertions = (options: {
  readonly issuer: string
  readonly signingKeyAt: (nowMillis: number) => SigningKey
  readonly randomId: () => string
  readonly max?: number
}): UpstreamAssertionsShape => {
  const held = new ExpiringEntries<string, HeldAssertion>(options.max ?? MAX_ASSERTIONS)
  // At most one per id being signed: bounded by the calls in flight (UPSTREAM_MAX_CONCURRENCY).
  const signing = new Map<string, Promise<string>>()

  const sign = async (key: SigningKey, subject: AssertionSubject, nowMillis: number): Promise<string> => {
    const iat = Math.floor(nowMillis / 1000)
    const claims = {
      iss: options.issuer,
      aud: subject.audience,
      ...(subject.clientId === null ? {} : { sub: subject.clientId }),
      data: { service_uuid: subject.uuid, profile: subject.profile, environment: subject.environment },
      client_authenticated: subject.clientId !== null,
      iat,
      exp: iat + ASSERTION_LIFETIME_SECONDS,
      jti: options.randomId()
    }
    const signingInput = `${key.encodedHeader}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`
    // WebCrypto signs on libuv's thread pool, off the event loop.
    const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key.privateKey, Buffer.from(signingInput))
    return `${signingInput}.${Buffer.from(signature).toString("base64url")}`
  }

  const assertionAt = (subject: AssertionSubject, nowMillis: number, id = assertionIdOf(subject)): string | Promise<string> => {
    const key = options.signingKeyAt(nowMillis)
    const known = held.get(id, nowMillis)
    if (
      known !== undefined && known.kid === key.kid && nowMillis < known.reuseUntil && nowMillis >= known.reuseUntil - REUSE_SECONDS * 1000
    ) {
      return known.token
    }
    // Concurrent calls of one caller share one signature.
    const pending = signing.get(id)
    if (pending !== undefined) return pending
    const made = sign(key, subject, nowMillis).then(
      (token) => {
        signing.delete(id)
        const reuseUntil = nowMillis + REUSE_SECONDS * 1000
        held.set(id, { token, kid: key.kid, reuseUntil }, reuseUntil, nowMillis)
        return token
      },
      (error: unknown) => {
        signing.delete(id)
        throw error
      }
    )
    signing.set(id, made)
    return made
  }

  return { assertionAt, sweep: (nowMillis) => held.sweep(nowMillis), size: () => held.size }
}
