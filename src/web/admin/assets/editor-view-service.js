/*
 * One service in the editor: its facts, its credentials (live and staged), and the buttons that
 * stage additions and removals.
 */
import {
  changesFor,
  expiryMark,
  isRemovalStaged,
  MAX_CREDENTIALS,
  projectedCount,
  stageAdd,
  stageRemoval,
  unstageAdd,
  unstageRemoval
} from "./editor-changes.js"
import { openDialog } from "./editor-dialog.js"
import { announce, clearMessages, copyText, focusKey, h, nextId, showAlert, timeEl } from "./editor-dom.js"
import { mayChange, state } from "./editor-state.js"
import { renderEditor } from "./editor-view-editor.js"
import { federatedAddForm, federatedFacts } from "./editor-view-federated.js"
import { keyAddForm, publicKeyFacts } from "./editor-view-keys.js"
import { serviceSettings } from "./editor-view-settings.js"

/** What "Last used" means (docs/contract.md §3). */
const LAST_USED_MEANS = "the last token request with this credential or service call with one of its tokens, recorded up to a minute late"

export const AUTH_LABELS = { oauth: "OAuth 2.0 (Client Credentials)", none: "None" }

export const serviceLabel = (service) => (service.name ? service.name : `Unnamed service ${service.uuid.slice(0, 8)}`)

export function handlerText(handler) {
  if (!handler || typeof handler !== "object") return "Echo"
  if (handler.type === "echo") return "Echo (answers with the request)"
  if (handler.type === "proxy") {
    const timeout = handler.timeout_ms === undefined ? "" : `, timeout ${handler.timeout_ms} ms`
    const headers = Array.isArray(handler.headers) && handler.headers.length > 0 ? `, headers ${handler.headers.join(", ")}` : ""
    return `Proxy to ${handler.url}${timeout}${headers}`
  }
  return String(handler.type)
}

function limitText(service, count, pending) {
  if (count > MAX_CREDENTIALS) {
    return `Over the limit: saving would leave ${count} credentials, and a service holds at most ${MAX_CREDENTIALS}. Remove a credential or undo a new one.`
  }
  if (count === MAX_CREDENTIALS) {
    return `Limit reached: a service holds at most ${MAX_CREDENTIALS} credentials. Remove one to add another.`
  }
  return (
    `${count} of ${MAX_CREDENTIALS} credentials${pending ? " after saving" : ""}.` +
    (service.auth_type !== "oauth" ? " Adding a credential switches this service to OAuth 2.0." : "")
  )
}

export function serviceSection(envName, service) {
  const titleId = nextId("svc-title")
  const limitId = nextId("svc-limit")
  const staged = changesFor(state.staged, envName, service.uuid)
  const count = projectedCount(state.staged, envName, service)
  const atLimit = count >= MAX_CREDENTIALS
  const name = serviceLabel(service)
  const pending = staged.adds.length + staged.removes.length > 0

  const rows = []
  for (const cred of service.credentials) rows.push(credentialRow(envName, service, cred))
  staged.adds.forEach((add, i) => rows.push(pendingAddRow(add, i, staged.adds.length)))
  if (rows.length === 0) {
    rows.push(h("tr", { class: "empty-row" }, h("td", { colspan: "5" }, "No credentials yet. Add one to let callers get tokens.")))
  }
  const authText = AUTH_LABELS[service.auth_type] || String(service.auth_type)

  return h(
    "section",
    { class: `service card${pending ? " has-pending" : ""}`, "aria-labelledby": titleId, "data-service": service.uuid },
    h(
      "div",
      { class: "service-head" },
      h("h3", { id: titleId, tabindex: "-1", "data-focus": `svc:${envName}:${service.uuid}` }, name),
      h("span", { class: `badge ${service.auth_type === "oauth" ? "badge-oauth" : "badge-none"}`, "aria-hidden": "true" }, authText)
    ),
    h(
      "dl",
      { class: "facts" },
      h("div", null, h("dt", null, "UUID"), h("dd", null, h("code", { class: "mono" }, service.uuid))),
      h("div", null, h("dt", null, "Authentication"), h("dd", null, authText)),
      h("div", null, h("dt", null, "Handler"), h("dd", null, handlerText(service.handler))),
      h("div", null, h("dt", null, "Rate limit"), h("dd", null, rateLimitText(service.rate_limit))),
      service.require_dpop === true
        ? h("div", null, h("dt", null, "Tokens"), h("dd", null, "DPoP-bound only (Bearer refused)"))
        : null,
      typeof service.upstream_refusal === "string"
        ? h("div", null, h("dt", null, "Upstream"), h("dd", null, `Refused, calls answer 502: ${service.upstream_refusal}`))
        : null
    ),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "creds" },
        h("caption", null, `Credentials of ${name}`),
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            h("th", { scope: "col" }, "Client ID"),
            h("th", { scope: "col" }, "Created"),
            h("th", { scope: "col", title: LAST_USED_MEANS }, "Last used"),
            h("th", { scope: "col" }, "Expires"),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions"))
          )
        ),
        h("tbody", null, rows)
      )
    ),
    !mayChange() ? null : h(
      "div",
      { class: "service-foot" },
      h(
        "button",
        {
          type: "button",
          class: "btn",
          disabled: atLimit,
          "aria-describedby": limitId,
          "data-focus": `add:${envName}:${service.uuid}`,
          onclick: () => onAdd(envName, service)
        },
        h("span", { "aria-hidden": "true", class: "plus" }, "+ "),
        "Add credential"
      ),
      h("p", { class: `hint${atLimit ? " hint-limit" : ""}`, id: limitId }, limitText(service, count, pending)),
      keyAddForm(envName, service, atLimit, name),
      federatedAddForm(envName, service, atLimit, name)
    ),
    mayChange() ? serviceSettings(envName, service) : null
  )
}

function credentialRow(envName, service, cred) {
  const removing = isRemovalStaged(state.staged, envName, service.uuid, cred.client_id)
  const key = `cred:${envName}:${service.uuid}:${cred.client_id}`
  const action = !mayChange() ? null : removing
    ? h(
      "button",
      {
        type: "button",
        class: "btn btn-small",
        "aria-label": `Undo removal of ${cred.client_id}`,
        "data-focus": key,
        onclick: () => onUndoRemove(envName, service, cred)
      },
      "Undo"
    )
    : h(
      "button",
      {
        type: "button",
        class: "btn btn-small btn-danger-outline",
        "aria-label": `Remove ${cred.client_id}`,
        "data-focus": key,
        onclick: (e) => askRemove(envName, service, cred, e.currentTarget)
      },
      "Remove"
    )
  const code = h("code", { class: "mono client-id" }, cred.client_id)
  return h(
    "tr",
    { class: removing ? "pending-removal" : null },
    h(
      "td",
      { "data-label": "Client ID" },
      h(
        "span",
        { class: "client-id-cell" },
        code,
        h(
          "button",
          {
            type: "button",
            class: "btn btn-small btn-quiet copy-id",
            "aria-label": `Copy client ID ${cred.client_id}`,
            "data-focus": `copy:${key}`,
            onclick: () => copyText(cred.client_id, code, "Client ID")
          },
          "Copy"
        )
      ),
      cred.public_key ? publicKeyFacts(cred.public_key) : null,
      cred.federated ? federatedFacts(cred.federated) : null,
      removing ? h("span", { class: "badge badge-danger" }, "pending removal") : null
    ),
    h("td", { "data-label": "Created" }, timeEl(cred.created_at)),
    h("td", { "data-label": "Last used" }, timeEl(cred.last_used_at)),
    h("td", { "data-label": "Expires" }, expiryCell(cred.expires_at)),
    h("td", { class: "cell-action" }, action)
  )
}

function pendingAddRow(add, index, total) {
  const suffix = total > 1 ? ` ${index + 1}` : ""
  return h(
    "tr",
    { class: "pending-add" },
    h(
      "td",
      { "data-label": "Client ID" },
      add.public_key === undefined
        ? [
          h("span", { class: "badge badge-pending" }, "Pending: new credential"),
          h("span", { class: "muted small block" }, "Client ID and secret are generated when you save.")
        ]
        : [
          h("span", { class: "badge badge-pending" }, "Pending: new key credential"),
          h("span", { class: "muted small block" }, `Public key: ${add.key_label}. The client ID is generated when you save; no secret.`)
        ]
    ),
    h("td", { "data-label": "Created" }, h("span", { class: "muted" }, "on save")),
    h("td", { "data-label": "Last used" }, h("span", { class: "muted" }, "—")),
    h(
      "td",
      { "data-label": "Expires" },
      h("input", {
        type: "datetime-local",
        class: "expires-input",
        "aria-label": `Expiry of new credential${suffix}, in your local time (empty: the profile's policy, or never)`,
        title: "In your local time. Empty: the profile's credential lifetime, or never when it has none.",
        "aria-describedby": `expires-hint-${add.key}`,
        value: add.expires_local ?? "",
        onchange: (e) => {
          const value = e.currentTarget.value
          add.expires_local = value
          // The browser's local time, sent as RFC 3339 in UTC.
          add.expires_at = value === "" ? undefined : new Date(value).toISOString()
        }
      }),
      // Said on screen too, not only to a screen reader or on hover.
      h("span", { class: "muted small block", id: `expires-hint-${add.key}` }, "Your local time; empty: the profile's policy, or never.")
    ),
    h(
      "td",
      { class: "cell-action" },
      h(
        "button",
        {
          type: "button",
          class: "btn btn-small",
          "aria-label": `Undo new credential${suffix}`,
          "data-focus": `pending:${add.key}`,
          onclick: () => onUndoAdd(add)
        },
        "Undo"
      )
    )
  )
}

/** A service's rate limit in words. */
export function rateLimitText(rateLimit) {
  if (!rateLimit) return "None"
  return `${rateLimit.requests} calls per ${rateLimit.per_seconds} s for each client`
}

/** When a credential expires, marked when within 30 days or past. */
function expiryCell(expiresAt) {
  if (!expiresAt) return h("span", { class: "muted" }, "Never")
  const mark = expiryMark(expiresAt, Date.now())
  return h(
    "span",
    null,
    timeEl(expiresAt),
    mark === "expired"
      ? h("span", { class: "badge badge-danger" }, "expired: refused until removed")
      : mark === "soon"
      ? h("span", { class: "badge badge-pending" }, "expires within 30 days")
      : null
  )
}

function onAdd(envName, service) {
  clearMessages()
  const next = stageAdd(state.staged, envName, service)
  if (!next) {
    showAlert(`A service holds at most ${MAX_CREDENTIALS} credentials. Remove one before adding another.`)
    return
  }
  state.staged = next.changes
  renderEditor()
  focusKey(`add:${envName}:${service.uuid}`, `pending:${next.add.key}`)
  announce(`New credential for ${serviceLabel(service)} staged. Save the profile to create it.`)
}

function onUndoAdd(add) {
  clearMessages()
  state.staged = unstageAdd(state.staged, add.key)
  renderEditor()
  focusKey(`add:${add.environment}:${add.service_uuid}`, `svc:${add.environment}:${add.service_uuid}`)
  announce("Staged credential discarded.")
}

function askRemove(envName, service, cred, button) {
  clearMessages()
  openDialog({
    title: "Remove this credential?",
    body: [
      h(
        "p",
        null,
        "Client ID ",
        h("code", { class: "mono" }, cred.client_id),
        " of ",
        h("strong", null, serviceLabel(service)),
        ` in environment ${envName}.`
      ),
      h(
        "p",
        null,
        "The removal is staged: it takes effect when you save the profile. From then on this credential is refused and every token issued with it stops working."
      ),
      cred.last_used_at
        ? h(
          "p",
          { class: "muted" },
          "Last used ",
          timeEl(cred.last_used_at),
          ` (${LAST_USED_MEANS}). A caller may keep its token for an hour: remove the credential once this has not moved ` +
            "for an hour and a minute, so that no caller still holds a live token of it."
        )
        : h("p", { class: "muted" }, "This credential has never been used.")
    ],
    confirmLabel: "Remove credential",
    returnFocus: button,
    onConfirm: () => {
      state.staged = stageRemoval(state.staged, envName, service, cred.client_id)
      renderEditor()
      focusKey(`cred:${envName}:${service.uuid}:${cred.client_id}`)
      announce(`Removal of ${cred.client_id} staged. Save the profile to apply it.`)
    }
  })
}

function onUndoRemove(envName, service, cred) {
  clearMessages()
  state.staged = unstageRemoval(state.staged, envName, service.uuid, cred.client_id)
  renderEditor()
  focusKey(`cred:${envName}:${service.uuid}:${cred.client_id}`)
  announce(`Removal of ${cred.client_id} undone.`)
}
