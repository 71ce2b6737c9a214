/*
 * Staged credential changes of the profile editor: a pure module (no DOM, no fetch, no clock).
 *
 * A value of "changes" is `{ profile, adds, removes, nextKey }` and is never mutated: every function
 * here returns a new value. `adds` are `{ key, environment, service_uuid }` (a key tells two staged
 * additions to one service apart), with `public_key` and `key_label` for a key credential;
 * `removes` are `{ environment, service_uuid, client_id }`.
 * A profile document is what `normalizeDoc` returns: `{ profile, created_at, environments: [{ name,
 * services: [{ uuid, name, auth_type, handler, credentials: [{ client_id, created_at, last_used_at }] }] }] }`.
 */

import { federatedInfo } from "./editor-issuers.js"
import { MAX_CREDENTIALS } from "./Limits.js"

/** A service holds at most this many live credentials (the server's own limit, domain/Limits.ts). */
export { MAX_CREDENTIALS }

/**
 * @typedef {{ readonly kty: string, readonly kid: string, readonly thumbprint: string }} PublicKeyInfo
 * @typedef {{ readonly client_id: string, readonly created_at: string | null, readonly last_used_at: string | null,
 *   readonly expires_at?: string | null, readonly public_key?: PublicKeyInfo,
 *   readonly federated?: { readonly issuer: string, readonly subject: string, readonly claims?: Record<string, string> } }} Credential
 * @typedef {{ readonly requests: number, readonly per_seconds: number }} RateLimit
 * @typedef {object} Handler
 * @property {string} type
 * @property {string} [url]
 * @property {number} [timeout_ms]
 * @property {ReadonlyArray<string> | Readonly<Record<string, string>>} [headers] Answered: the static
 *   headers' names. Sent: names with values (replacing them).
 * @typedef {{ readonly uuid: string, readonly name: string, readonly auth_type: string,
 *   readonly handler: Handler | undefined, readonly rate_limit?: RateLimit | null, readonly require_dpop?: boolean,
 *   readonly credentials: ReadonlyArray<Credential> }} Service
 * @typedef {{ readonly name: string, readonly services: ReadonlyArray<Service> }} Environment
 * @typedef {{ readonly profile: string, readonly created_at: string | null,
 *   readonly credential_max_lifetime_days?: number | null,
 *   readonly environments: ReadonlyArray<Environment> }} ProfileDoc
 * @typedef {{ readonly key: string, readonly environment: string, readonly service_uuid: string,
 *   expires_at?: string | undefined, expires_local?: string | undefined,
 *   readonly public_key?: Record<string, unknown> | string, readonly key_label?: string }} StagedAdd
 * @typedef {{ readonly environment: string, readonly service_uuid: string, readonly client_id: string }} StagedRemoval
 * @typedef {{ readonly profile: string | null, readonly adds: ReadonlyArray<StagedAdd>,
 *   readonly removes: ReadonlyArray<StagedRemoval>, readonly nextKey: number }} Changes
 * @typedef {{ readonly op: "add_credential", readonly environment: string, readonly service_uuid: string,
 *   readonly expires_at?: string }
 *   | { readonly op: "add_key_credential", readonly environment: string, readonly service_uuid: string,
 *   readonly expires_at?: string, readonly public_key: Record<string, unknown> | string }
 *   | { readonly op: "remove_credential", readonly environment: string, readonly service_uuid: string,
 *   readonly client_id: string }} SaveChange
 */

/**
 * No staged change, for `profile` (or for no profile yet).
 * @param {string | null} [profile]
 * @returns {Changes}
 */
export function emptyChanges(profile = null) {
  return { profile, adds: [], removes: [], nextKey: 1 }
}

/** @type {(changes: Changes) => boolean} */
export const isDirty = (changes) => changes.adds.length > 0 || changes.removes.length > 0

/** @type {(item: { readonly environment: string, readonly service_uuid: string }, environment: string, uuid: string) => boolean} */
const sameService = (item, environment, uuid) => item.environment === environment && item.service_uuid === uuid

/**
 * The staged additions and removals of one service.
 * @param {Changes} changes
 * @param {string} environment
 * @param {string} uuid
 * @returns {{ adds: Array<StagedAdd>, removes: Array<StagedRemoval> }}
 */
export function changesFor(changes, environment, uuid) {
  return {
    adds: changes.adds.filter((a) => sameService(a, environment, uuid)),
    removes: changes.removes.filter((r) => sameService(r, environment, uuid))
  }
}

/**
 * @param {Changes} changes
 * @param {string} environment
 * @param {string} uuid
 * @param {string} clientId
 * @returns {boolean}
 */
export function isRemovalStaged(changes, environment, uuid, clientId) {
  return changes.removes.some((r) => sameService(r, environment, uuid) && r.client_id === clientId)
}

/**
 * Live credentials − staged removals of them + staged additions: what saving would leave.
 * @param {Changes} changes
 * @param {string} environment
 * @param {Service} service
 * @returns {number}
 */
export function projectedCount(changes, environment, service) {
  const staged = changesFor(changes, environment, service.uuid)
  const live = service.credentials.length
  const removed = staged.removes.filter((r) => service.credentials.some((c) => c.client_id === r.client_id)).length
  return live - removed + staged.adds.length
}

/** @type {(changes: Changes, environment: string, service: Service) => boolean} */
export const canAdd = (changes, environment, service) => projectedCount(changes, environment, service) < MAX_CREDENTIALS

/**
 * Stages one new credential: a secret one, or with `key` a key credential (its public key, and the
 * key's type in words); `null` when the service would go over the limit.
 * @param {Changes} changes
 * @param {string} environment
 * @param {Service} service
 * @param {{ readonly publicKey: Record<string, unknown> | string, readonly label: string }} [key]
 * @returns {{ changes: Changes, add: StagedAdd } | null}
 */
export function stageAdd(changes, environment, service, key) {
  if (!canAdd(changes, environment, service)) return null
  const add = {
    key: `a${changes.nextKey}`,
    environment,
    service_uuid: service.uuid,
    ...(key === undefined ? {} : { public_key: key.publicKey, key_label: key.label })
  }
  return { changes: { ...changes, adds: [...changes.adds, add], nextKey: changes.nextKey + 1 }, add }
}

/**
 * @param {Changes} changes
 * @param {string} key
 * @returns {Changes}
 */
export function unstageAdd(changes, key) {
  return { ...changes, adds: changes.adds.filter((a) => a.key !== key) }
}

/**
 * Stages the removal of a live credential of the service (once; unknown credentials are ignored).
 * @param {Changes} changes
 * @param {string} environment
 * @param {Service} service
 * @param {string} clientId
 * @returns {Changes}
 */
export function stageRemoval(changes, environment, service, clientId) {
  if (isRemovalStaged(changes, environment, service.uuid, clientId)) return changes
  if (!service.credentials.some((c) => c.client_id === clientId)) return changes
  const remove = { environment, service_uuid: service.uuid, client_id: clientId }
  return { ...changes, removes: [...changes.removes, remove] }
}

/**
 * @param {Changes} changes
 * @param {string} environment
 * @param {string} uuid
 * @param {string} clientId
 * @returns {Changes}
 */
export function unstageRemoval(changes, environment, uuid, clientId) {
  return {
    ...changes,
    removes: changes.removes.filter((r) => !(sameService(r, environment, uuid) && r.client_id === clientId))
  }
}

/**
 * @param {ProfileDoc} doc
 * @param {string} environment
 * @param {string} uuid
 * @returns {Service | undefined}
 */
function findService(doc, environment, uuid) {
  const env = doc.environments.find((e) => e.name === environment)
  return env ? env.services.find((s) => s.uuid === uuid) : undefined
}

/**
 * Keeps what still applies to a freshly loaded document: removals of credentials still live,
 * additions to services that still exist. Another profile's document starts afresh.
 * @param {Changes} changes
 * @param {ProfileDoc} doc
 * @returns {Changes}
 */
export function reconcile(changes, doc) {
  if (changes.profile !== doc.profile) return emptyChanges(doc.profile)
  return {
    ...changes,
    removes: changes.removes.filter((r) => {
      const s = findService(doc, r.environment, r.service_uuid)
      return !!s && s.credentials.some((c) => c.client_id === r.client_id)
    }),
    adds: changes.adds.filter((a) => !!findService(doc, a.environment, a.service_uuid))
  }
}

/**
 * The services that saving would take over the limit (after someone else added credentials).
 * @param {Changes} changes
 * @param {ProfileDoc} doc
 * @returns {Array<{ environment: string, service_uuid: string, count: number }>}
 */
export function overLimit(changes, doc) {
  /** @type {Array<{ environment: string, service_uuid: string, count: number }>} */
  const over = []
  for (const env of doc.environments) {
    for (const service of env.services) {
      const count = projectedCount(changes, env.name, service)
      if (count > MAX_CREDENTIALS) over.push({ environment: env.name, service_uuid: service.uuid, count })
    }
  }
  return over
}

/**
 * The body of `POST /admin/profiles/{profile}/save`: removals first, so a rotation fits the limit.
 * @param {Changes} changes
 * @returns {{ changes: Array<SaveChange> }}
 */
export function saveRequest(changes) {
  return {
    changes: [
      ...changes.removes.map((r) => ({
        op: /** @type {const} */ ("remove_credential"),
        environment: r.environment,
        service_uuid: r.service_uuid,
        client_id: r.client_id
      })),
      ...changes.adds.map((a) => {
        const add = { environment: a.environment, service_uuid: a.service_uuid, ...(a.expires_at ? { expires_at: a.expires_at } : {}) }
        return a.public_key === undefined
          ? { op: /** @type {const} */ ("add_credential"), ...add }
          : { op: /** @type {const} */ ("add_key_credential"), ...add, public_key: a.public_key }
      })
    ]
  }
}

/** @type {(n: number, one: string, many: string) => string} */
export const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`

/**
 * "No unsaved changes." or "2 unsaved changes: 1 new credential, 1 removal."
 * @param {Changes} changes
 * @returns {string}
 */
export function summaryText(changes) {
  const adds = changes.adds.length
  const removes = changes.removes.length
  if (adds + removes === 0) return "No unsaved changes."
  const parts = []
  if (adds) parts.push(plural(adds, "new credential", "new credentials"))
  if (removes) parts.push(plural(removes, "removal", "removals"))
  return `${plural(adds + removes, "unsaved change", "unsaved changes")}: ${parts.join(", ")}.`
}

/**
 * A key credential's public key as listed (`{kty, kid, thumbprint}`), as `{ public_key }`; undefined
 * for a secret credential or anything else.
 * @param {any} value
 * @returns {{ public_key: PublicKeyInfo } | undefined}
 */
function publicKeyInfo(value) {
  if (!value || typeof value !== "object") return undefined
  const { kid, kty, thumbprint } = value
  if (typeof kty !== "string" || typeof kid !== "string" || typeof thumbprint !== "string") return undefined
  return { public_key: { kty, kid, thumbprint } }
}

/**
 * The profile document as the page uses it, whatever the server sent.
 * @param {unknown} data
 * @param {string} profile
 * @returns {ProfileDoc}
 */
export function normalizeDoc(data, profile) {
  /** @type {any} */
  const doc = data && typeof data === "object" ? data : {}
  /** @type {(value: unknown) => Array<any>} */
  const list = (value) => (Array.isArray(value) ? value : [])
  return {
    profile: typeof doc.profile === "string" ? doc.profile : profile,
    created_at: doc.created_at ?? null,
    credential_max_lifetime_days: typeof doc.credential_max_lifetime_days === "number" ? doc.credential_max_lifetime_days : null,
    environments: list(doc.environments).map((e) => ({
      name: String(e.name),
      services: list(e.services).map((s) => ({
        uuid: String(s.uuid),
        name: typeof s.name === "string" ? s.name : "",
        auth_type: s.auth_type,
        handler: s.handler,
        rate_limit: s.rate_limit && typeof s.rate_limit === "object" ? s.rate_limit : null,
        require_dpop: s.require_dpop === true,
        credentials: list(s.credentials).map((c) => ({
          client_id: String(c.client_id),
          created_at: c.created_at ?? null,
          expires_at: c.expires_at ?? null,
          last_used_at: c.last_used_at ?? null,
          ...(publicKeyInfo(c.public_key) ?? {}),
          ...(federatedInfo(c.federated) ?? {})
        }))
      }))
    }))
  }
}

/**
 * The body of `PUT …/services/{uuid}` that renames a service and sets its handler, keeping its
 * authentication: `{ name, auth_type, handler: {type:"echo"} | {type:"proxy", url, timeout_ms?, headers?} }`.
 * `proxy.timeoutMs`: the timeout field's text (empty: the server's default). `proxy.headers`: static
 * headers to set, replacing the stored ones (`{}` removes them); absent keeps the stored ones, whose
 * values the editor never sees.
 * @param {Service} service
 * @param {string} name
 * @param {string} handlerType
 * @param {string} [url]
 * @param {{ readonly timeoutMs?: string, readonly headers?: Readonly<Record<string, string>> }} [proxy]
 * @param {RateLimit | null} [rateLimit] the rate limit to set (null: none); the stored one by default
 * @param {boolean} [requireDpop] whether only DPoP-bound tokens are accepted; the stored setting by default
 * @returns {{ name: string, auth_type: string, handler: Handler, rate_limit?: RateLimit, require_dpop?: true }}
 */
export function serviceUpdate(
  service,
  name,
  handlerType,
  url,
  proxy = {},
  rateLimit = service.rate_limit ?? null,
  requireDpop = service.require_dpop === true
) {
  /** @type {{ type: string, url?: string, timeout_ms?: number, headers?: Readonly<Record<string, string>> }} */
  let handler = { type: "echo" }
  if (handlerType === "proxy") {
    handler = { type: "proxy", url: String(url).trim() }
    const timeout = String(proxy.timeoutMs ?? "").trim()
    if (timeout !== "") handler.timeout_ms = Number(timeout)
    if (proxy.headers !== undefined) handler.headers = proxy.headers
  }
  const body = { name: String(name).trim(), auth_type: service.auth_type, handler }
  // A PUT replaces the rate limit and require_dpop like the handler: the stored ones are sent back unless changed.
  return { ...body, ...(rateLimit ? { rate_limit: rateLimit } : {}), ...(requireDpop ? { require_dpop: true } : {}) }
}

/** Thirty days: a credential expiring sooner is marked. */
export const EXPIRY_WARNING_MS = 30 * 86_400_000

/**
 * How a credential's expiry is marked: `expired`, `soon` (within 30 days), or null (later, or never).
 * @param {string | null | undefined} expiresAt
 * @param {number} now
 * @returns {"expired" | "soon" | null}
 */
export function expiryMark(expiresAt, now) {
  if (!expiresAt) return null
  const at = Date.parse(expiresAt)
  if (Number.isNaN(at)) return null
  if (at <= now) return "expired"
  return at - now <= EXPIRY_WARNING_MS ? "soon" : null
}

/**
 * A rate limit typed in the settings form: `{ rateLimit }` (null: none, both fields empty), or `{ error }`.
 * @param {string} requests
 * @param {string} perSeconds
 * @returns {{ readonly rateLimit: { requests: number, per_seconds: number } | null, readonly error?: undefined }
 *   | { readonly error: string, readonly rateLimit?: undefined }}
 */
export function rateLimitFields(requests, perSeconds) {
  const r = String(requests).trim()
  const s = String(perSeconds).trim()
  if (r === "" && s === "") return { rateLimit: null }
  const n = Number(r)
  const w = Number(s)
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000) return { error: "Requests must be a whole number from 1 to 1000000." }
  if (!Number.isInteger(w) || w < 1 || w > 3600) return { error: "The window must be a whole number of seconds from 1 to 3600." }
  return { rateLimit: { requests: n, per_seconds: w } }
}

/**
 * Static headers typed one per line as `Name: value`: `{ headers }`, or `{ error }` naming the first
 * line that is not one (by its number, never repeating a value).
 * @param {string} text
 * @returns {{ readonly headers: Record<string, string>, readonly error?: undefined }
 *   | { readonly error: string, readonly headers?: undefined }}
 */
export function headerLines(text) {
  /** @type {Record<string, string>} */
  const headers = {}
  const lines = String(text).split(/\r?\n/)
  for (const [index, line] of lines.entries()) {
    if (line.trim() === "") continue
    const colon = line.indexOf(":")
    const name = colon > 0 ? line.slice(0, colon).trim() : ""
    const value = colon > 0 ? line.slice(colon + 1).trim() : ""
    if (name === "" || value === "") return { error: `Line ${index + 1} is not "Name: value".` }
    headers[name] = value
  }
  return { headers }
}
