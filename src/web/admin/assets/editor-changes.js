/*
 * Staged credential changes of the profile editor: a pure module (no DOM, no fetch, no clock).
 *
 * A value of "changes" is `{ profile, adds, removes, nextKey }` and is never mutated: every function
 * here returns a new value. `adds` are `{ key, environment, service_uuid }` (a key tells two staged
 * additions to one service apart); `removes` are `{ environment, service_uuid, client_id }`.
 * A profile document is what `normalizeDoc` returns: `{ profile, created_at, environments: [{ name,
 * services: [{ uuid, name, auth_type, handler, credentials: [{ client_id, created_at, last_used_at }] }] }] }`.
 */

import { MAX_CREDENTIALS } from "./Limits.js"

/** A service holds at most this many live credentials (the server's own limit, domain/Limits.ts). */
export { MAX_CREDENTIALS }

/**
 * @typedef {{ readonly client_id: string, readonly created_at: string | null, readonly last_used_at: string | null }} Credential
 * @typedef {object} Handler
 * @property {string} type
 * @property {string} [url]
 * @property {number} [timeout_ms]
 * @property {ReadonlyArray<string> | Readonly<Record<string, string>>} [headers] Answered: the static
 *   headers' names. Sent: names with values (replacing them).
 * @typedef {{ readonly uuid: string, readonly name: string, readonly auth_type: string,
 *   readonly handler: Handler | undefined, readonly credentials: ReadonlyArray<Credential> }} Service
 * @typedef {{ readonly name: string, readonly services: ReadonlyArray<Service> }} Environment
 * @typedef {{ readonly profile: string, readonly created_at: string | null,
 *   readonly environments: ReadonlyArray<Environment> }} ProfileDoc
 * @typedef {{ readonly key: string, readonly environment: string, readonly service_uuid: string }} StagedAdd
 * @typedef {{ readonly environment: string, readonly service_uuid: string, readonly client_id: string }} StagedRemoval
 * @typedef {{ readonly profile: string | null, readonly adds: ReadonlyArray<StagedAdd>,
 *   readonly removes: ReadonlyArray<StagedRemoval>, readonly nextKey: number }} Changes
 * @typedef {{ readonly op: "add_credential", readonly environment: string, readonly service_uuid: string }
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
 * Stages one new credential; `null` when the service would go over the limit.
 * @param {Changes} changes
 * @param {string} environment
 * @param {Service} service
 * @returns {{ changes: Changes, add: StagedAdd } | null}
 */
export function stageAdd(changes, environment, service) {
  if (!canAdd(changes, environment, service)) return null
  const add = { key: `a${changes.nextKey}`, environment, service_uuid: service.uuid }
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
      ...changes.adds.map((a) => ({ op: /** @type {const} */ ("add_credential"), environment: a.environment, service_uuid: a.service_uuid }))
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
    environments: list(doc.environments).map((e) => ({
      name: String(e.name),
      services: list(e.services).map((s) => ({
        uuid: String(s.uuid),
        name: typeof s.name === "string" ? s.name : "",
        auth_type: s.auth_type,
        handler: s.handler,
        credentials: list(s.credentials).map((c) => ({
          client_id: String(c.client_id),
          created_at: c.created_at ?? null,
          last_used_at: c.last_used_at ?? null
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
 * @returns {{ name: string, auth_type: string, handler: Handler }}
 */
export function serviceUpdate(service, name, handlerType, url, proxy = {}) {
  /** @type {{ type: string, url?: string, timeout_ms?: number, headers?: Readonly<Record<string, string>> }} */
  let handler = { type: "echo" }
  if (handlerType === "proxy") {
    handler = { type: "proxy", url: String(url).trim() }
    const timeout = String(proxy.timeoutMs ?? "").trim()
    if (timeout !== "") handler.timeout_ms = Number(timeout)
    if (proxy.headers !== undefined) handler.headers = proxy.headers
  }
  return { name: String(name).trim(), auth_type: service.auth_type, handler }
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
