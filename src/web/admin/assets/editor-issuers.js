/*
 * Workload identity federation in the editor, without DOM or fetch (unit-tested): a trusted issuer's
 * form made into the body of `POST /admin/trusted-issuers` or `PUT …/{name}`, and a federated
 * credential's claim rows made into its `claims` and shown in words. What is refused here is
 * only what is plainly wrong; the server checks everything again and says what it refuses.
 */
import { FEDERATED_CLAIMS_MAX, FEDERATION_ALGORITHMS, MAX_TOKEN_LIFETIME_LIMIT_SECONDS } from "./Limits.js"

/**
 * @typedef {{ readonly issuer: string, readonly keys: "discovery" | "inline", readonly jwks: string,
 *   readonly audience: string, readonly algorithms: ReadonlyArray<string>, readonly maxLifetime: string,
 *   readonly profiles: string, readonly allowInsecureLoopback: boolean }} IssuerFields
 * @typedef {{ issuer: string, jwks?: { keys: Array<unknown> }, audience?: string, algorithms: Array<string>,
 *   max_token_lifetime_seconds?: number, profiles: Array<string>, allow_insecure_loopback?: true }} IssuerBody
 * @typedef {"issuer" | "jwks" | "algorithms" | "maxLifetime" | "profiles"} IssuerField
 */

/**
 * Profile names typed with commas (or spaces) between them, each once.
 * @param {string} text
 * @returns {Array<string>}
 */
export function profileNames(text) {
  return [...new Set(String(text).split(/[\s,]+/).filter((name) => name !== ""))]
}

/**
 * A pasted JWK Set: `{"keys": [...]}`, or a single JWK taken as a set of one.
 * @param {string} text
 * @returns {{ jwks: { keys: Array<unknown> }, error?: undefined } | { error: string, jwks?: undefined }}
 */
export function pastedJwks(text) {
  let value
  try {
    value = JSON.parse(String(text).trim())
  } catch {
    return { error: "The JWKS is not valid JSON: paste the issuer's key set, {\"keys\": [...]}." }
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    if (Array.isArray(value.keys)) {
      return value.keys.length === 0 ? { error: "The JWKS holds no key." } : { jwks: { keys: value.keys } }
    }
    if (typeof value.kty === "string") return { jwks: { keys: [value] } }
  }
  return { error: "The JWKS must be a JSON object with a \"keys\" array (RFC 7517 §5)." }
}

/**
 * The body that registers or replaces an issuer, or the field at fault and why. Empty optional
 * fields are left out, so the server applies its defaults (audience, lifetime).
 * @param {IssuerFields} fields
 * @returns {{ body: IssuerBody, error?: undefined, field?: undefined } | { error: string, field: IssuerField, body?: undefined }}
 */
export function issuerBody(fields) {
  const issuer = fields.issuer.trim()
  if (issuer === "") return { error: "Enter the issuer URL: its tokens' iss, exactly.", field: "issuer" }
  /** @type {IssuerBody} */
  const body = { issuer, algorithms: FEDERATION_ALGORITHMS.filter((alg) => fields.algorithms.includes(alg)), profiles: [] }
  if (fields.keys === "inline") {
    const pasted = pastedJwks(fields.jwks)
    if (pasted.error !== undefined) return { error: pasted.error, field: "jwks" }
    body.jwks = pasted.jwks
  }
  const audience = fields.audience.trim()
  if (audience !== "") body.audience = audience
  if (body.algorithms.length === 0) return { error: "Accept at least one algorithm.", field: "algorithms" }
  const lifetime = fields.maxLifetime.trim()
  if (lifetime !== "") {
    const seconds = Number(lifetime)
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_TOKEN_LIFETIME_LIMIT_SECONDS) {
      return {
        error: `The longest token lifetime is a whole number of seconds, 1 to ${MAX_TOKEN_LIFETIME_LIMIT_SECONDS}.`,
        field: "maxLifetime"
      }
    }
    body.max_token_lifetime_seconds = seconds
  }
  body.profiles = profileNames(fields.profiles)
  if (fields.allowInsecureLoopback) body.allow_insecure_loopback = true
  return { body }
}

/**
 * A federated credential's extra claims from its name/value rows (rows left empty are skipped), or
 * why they cannot be sent.
 * @param {ReadonlyArray<{ readonly name: string, readonly value: string }>} rows
 * @returns {{ claims: Record<string, string> | undefined, error?: undefined } | { error: string, claims?: undefined }}
 */
export function claimsOf(rows) {
  /** @type {Record<string, string>} */
  const claims = {}
  for (const row of rows) {
    const name = row.name.trim()
    if (name === "" && row.value === "") continue
    if (name === "") return { error: `The claim with value "${row.value}" needs a name.` }
    if (row.value === "") return { error: `Claim ${name} needs a value: the token must carry exactly that string.` }
    if (Object.hasOwn(claims, name)) return { error: `Claim ${name} is named twice.` }
    claims[name] = row.value
  }
  const count = Object.keys(claims).length
  if (count > FEDERATED_CLAIMS_MAX) return { error: `A credential may require at most ${FEDERATED_CLAIMS_MAX} claims.` }
  return { claims: count === 0 ? undefined : claims }
}

/**
 * A federated credential's identity in words: the issuer, the subject and each required claim.
 * @param {{ readonly issuer: string, readonly subject: string, readonly claims?: Readonly<Record<string, string>> }} identity
 * @returns {string}
 */
export function claimsText(identity) {
  const claims = Object.entries(identity.claims ?? {})
  return claims.map(([name, value]) => `${name} = ${value}`).join(" · ")
}

/**
 * A listed credential's federated identity as the page keeps it, or undefined for another credential.
 * @param {unknown} value
 * @returns {{ federated: { issuer: string, subject: string, claims?: Record<string, string> } } | undefined}
 */
export function federatedInfo(value) {
  if (!value || typeof value !== "object") return undefined
  const { issuer, subject, claims } = /** @type {any} */ (value)
  if (typeof issuer !== "string" || typeof subject !== "string") return undefined
  return { federated: { issuer, subject, ...(claims && typeof claims === "object" ? { claims } : {}) } }
}
