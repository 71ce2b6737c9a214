/*
 * The profile's history: its recent changes from the audit trail (GET /admin/audit?profile=…),
 * newest first, with who made them. Loaded after the profile, and again after every change the
 * page makes; it never holds a secret (the trail has none).
 */
import { api, describeError } from "./editor-api.js"
import { h, timeEl } from "./editor-dom.js"
import { enc, state } from "./editor-state.js"

const PAGE = 20

const ACTIONS = {
  "profile.created": "Profile created",
  "profile.deleted": "Profile deleted",
  "profile.saved": "Profile saved",
  "environment.created": "Environment created",
  "environment.deleted": "Environment deleted",
  "service.created": "Service created",
  "service.changed": "Service changed",
  "service.deleted": "Service deleted",
  "credential.added": "Credential added",
  "credential.removed": "Credential removed",
  "credential.changed": "Credential's introspection permission changed",
  "credential.expired": "Credential expired",
  "profile.changed": "Profile settings changed",
  "key.rotated": "Signing key rotated",
  "admin_token.created": "Admin token created",
  "admin_token.revoked": "Admin token revoked",
  "token.revoked": "Token revoked by its client"
}

/** An action's label; one this page does not know yet in words too, never its raw name. */
const actionLabel = (action) => {
  if (ACTIONS[action]) return ACTIONS[action]
  const words = String(action).replace(/[._]+/g, " ").trim()
  return words.charAt(0).toUpperCase() + words.slice(1)
}

const historyPath = (profile, after) => `/admin/audit?profile=${enc(profile)}&limit=${PAGE}${after ? `&after=${enc(after)}` : ""}`

/** Reads the newest page of `profile`'s history and shows it in place. */
export async function refreshHistory(profile) {
  let next
  try {
    const { data } = await api("GET", historyPath(profile))
    next = { profile, events: data.events, next: data.next, error: null }
  } catch (err) {
    next = { profile, events: [], next: null, error: describeError(err) }
  }
  if (!state.doc || state.doc.profile !== profile) return
  state.history = next
  showHistory()
}

async function showOlder() {
  const history = state.history
  if (!history || !history.next) return
  try {
    const { data } = await api("GET", historyPath(history.profile, history.next))
    if (state.history !== history) return
    state.history = { ...history, events: [...history.events, ...data.events], next: data.next }
  } catch (err) {
    if (state.history !== history) return
    state.history = { ...history, error: describeError(err) }
  }
  showHistory()
  document.getElementById("history-title")?.focus()
}

function showHistory() {
  const el = document.getElementById("history")
  if (el) el.replaceWith(historySection())
}

/** The service an event names, by its name when the profile still has it; its uuid otherwise. */
function serviceText(event) {
  if (!event.service_uuid) return "—"
  const env = state.doc && state.doc.environments.find((e) => e.name === event.environment)
  const service = env && env.services.find((s) => s.uuid === event.service_uuid)
  return service && service.name ? service.name : event.service_uuid
}

function eventRow(event) {
  const cause = event.details && event.details.cause ? ` (with ${actionLabel(event.details.cause)})` : ""
  return h(
    "tr",
    null,
    h("td", { "data-label": "When" }, timeEl(event.time)),
    h("td", { "data-label": "Who" }, h("span", { title: `from ${event.source}` }, event.actor)),
    h("td", { "data-label": "What" }, `${actionLabel(event.action)}${cause}`),
    h("td", { "data-label": "Environment" }, event.environment || "—"),
    h("td", { "data-label": "Service" }, serviceText(event)),
    h("td", { "data-label": "Client ID" }, event.client_id ? h("code", { class: "client-id" }, event.client_id) : "—")
  )
}

export function historySection() {
  const history = state.history && state.doc && state.history.profile === state.doc.profile ? state.history : null
  let body
  if (!history) body = h("p", { class: "muted" }, "Loading the history…")
  else if (history.error) body = h("p", { class: "muted" }, `The history could not be loaded. ${history.error}`)
  else if (history.events.length === 0) body = h("p", { class: "muted" }, "No change recorded yet.")
  else {
    body = h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "creds history-table" },
        h("caption", null, "Recent changes, newest first"),
        h(
          "thead",
          null,
          h("tr", null, ["When", "Who", "What", "Environment", "Service", "Client ID"].map((label) => h("th", { scope: "col" }, label)))
        ),
        h("tbody", null, history.events.map(eventRow))
      )
    )
  }
  return h(
    "section",
    { id: "history", class: "card history", "aria-labelledby": "history-title" },
    h("h2", { id: "history-title", tabindex: "-1" }, "History"),
    body,
    history && history.next
      ? h("p", null, h("button", { type: "button", class: "btn btn-quiet", onclick: showOlder }, "Show older changes"))
      : null
  )
}
