/*
 * Staged credential changes of the profile editor: a pure module (no DOM, no fetch, no clock).
 *
 * A value of "changes" is `{ profile, adds, removes, nextKey }` and is never mutated: every function
 * here returns a new value. `adds` are `{ key, environment, service_uuid }` (a key tells two staged
 * additions to one service apart); `removes` are `{ environment, service_uuid, client_id }`.
 * A profile document is what `normalizeDoc` returns: `{ profile, created_at, environments: [{ name,
 * services: [{ uuid, name, auth_type, handler, credentials: [{ client_id, created_at, last_used_at }] }] }] }`.
 */

/** A service holds at most this many live credentials (docs/contract.md §0). */
export const MAX_CREDENTIALS = 2

/** No staged change, for `profile` (or for no profile yet). */
export function emptyChanges(profile = null) {
  return { profile, adds: [], removes: [], nextKey: 1 }
}

export const isDirty = (changes) => changes.adds.length > 0 || changes.removes.length > 0

const sameService = (item, environment, uuid) => item.environment === environment && item.service_uuid === uuid

/** The staged additions and removals of one service. */
export function changesFor(changes, environment, uuid) {
  return {
    adds: changes.adds.filter((a) => sameService(a, environment, uuid)),
    removes: changes.removes.filter((r) => sameService(r, environment, uuid))
  }
}

export function isRemovalStaged(changes, environment, uuid, clientId) {
  return changes.removes.some((r) => sameService(r, environment, uuid) && r.client_id === clientId)
}

/** Live credentials − staged removals of them + staged additions: what saving would leave. */
export function projectedCount(changes, environment, service) {
  const staged = changesFor(changes, environment, service.uuid)
  const live = service.credentials.length
  const removed = staged.removes.filter((r) => service.credentials.some((c) => c.client_id === r.client_id)).length
  return live - removed + staged.adds.length
}

export const canAdd = (changes, environment, service) => projectedCount(changes, environment, service) < MAX_CREDENTIALS

/** Stages one new credential; `null` when the service would go over the limit. */
export function stageAdd(changes, environment, service) {
  if (!canAdd(changes, environment, service)) return null
  const add = { key: `a${changes.nextKey}`, environment, service_uuid: service.uuid }
  return { changes: { ...changes, adds: [...changes.adds, add], nextKey: changes.nextKey + 1 }, add }
}

export function unstageAdd(changes, key) {
  return { ...changes, adds: changes.adds.filter((a) => a.key !== key) }
}

/** Stages the removal of a live credential of the service (once; unknown credentials are ignored). */
export function stageRemoval(changes, environment, service, clientId) {
  if (isRemovalStaged(changes, environment, service.uuid, clientId)) return changes
  if (!service.credentials.some((c) => c.client_id === clientId)) return changes
  const remove = { environment, service_uuid: service.uuid, client_id: clientId }
  return { ...changes, removes: [...changes.removes, remove] }
}

export function unstageRemoval(changes, environment, uuid, clientId) {
  return {
    ...changes,
    removes: changes.removes.filter((r) => !(sameService(r, environment, uuid) && r.client_id === clientId))
  }
}

function findService(doc, environment, uuid) {
  const env = doc.environments.find((e) => e.name === environment)
  return env ? env.services.find((s) => s.uuid === uuid) : undefined
}

/**
 * Keeps what still applies to a freshly loaded document: removals of credentials still live,
 * additions to services that still exist. Another profile's document starts afresh.
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

/** The services that saving would take over the limit (after someone else added credentials). */
export function overLimit(changes, doc) {
  const over = []
  for (const env of doc.environments) {
    for (const service of env.services) {
      const count = projectedCount(changes, env.name, service)
      if (count > MAX_CREDENTIALS) over.push({ environment: env.name, service_uuid: service.uuid, count })
    }
  }
  return over
}

/** The body of `POST /admin/profiles/{profile}/save`: removals first, so a rotation fits the limit. */
export function saveRequest(changes) {
  return {
    changes: [
      ...changes.removes.map((r) => ({
        op: "remove_credential",
        environment: r.environment,
        service_uuid: r.service_uuid,
        client_id: r.client_id
      })),
      ...changes.adds.map((a) => ({ op: "add_credential", environment: a.environment, service_uuid: a.service_uuid }))
    ]
  }
}

export const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`

/** "No unsaved changes." or "2 unsaved changes: 1 new credential, 1 removal." */
export function summaryText(changes) {
  const adds = changes.adds.length
  const removes = changes.removes.length
  if (adds + removes === 0) return "No unsaved changes."
  const parts = []
  if (adds) parts.push(plural(adds, "new credential", "new credentials"))
  if (removes) parts.push(plural(removes, "removal", "removals"))
  return `${plural(adds + removes, "unsaved change", "unsaved changes")}: ${parts.join(", ")}.`
}

/** The profile document as the page uses it, whatever the server sent. */
export function normalizeDoc(data, profile) {
  const doc = data && typeof data === "object" ? data : {}
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
 */
export function serviceUpdate(service, name, handlerType, url, proxy = {}) {
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
 */
export function headerLines(text) {
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
