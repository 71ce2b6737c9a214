/*
 * The trusted issuers page (#/issuers) of workload identity federation: for an admin token, the
 * registered issuers (`GET /admin/trusted-issuers`), each changed or deleted at once, and the form
 * that registers or changes one (`editor-view-issuer-form.js`). The server lets only admin tokens
 * manage issuers: any other token is told so here, with what it can do instead.
 */
import { ApiError, api } from "./editor-api.js"
import { openDialog } from "./editor-dialog.js"
import { announce, clearMessages, focusEl, h, main, replaceContent, showAlert, timeEl } from "./editor-dom.js"
import { fail } from "./editor-router.js"
import { enc, isAdmin, parseRoute, state } from "./editor-state.js"
import { issuerForm } from "./editor-view-issuer-form.js"

/** The issuer being changed in the form; null: the form registers a new one. */
let editing = null

/** Loads the issuers an admin may manage into `state.issuers`; false when that failed (reported). */
export async function loadIssuers() {
  try {
    const { data } = await api("GET", "/admin/trusted-issuers")
    state.issuers = data && Array.isArray(data.issuers) ? data.issuers : []
    return true
  } catch (err) {
    fail(err, "Could not load the trusted issuers.")
    return false
  }
}

export async function openIssuers(focus) {
  editing = null
  if (!isAdmin()) {
    renderNotAdmin()
    return
  }
  state.issuers = null
  render(focus)
  if ((await loadIssuers()) && parseRoute(location.hash).name === "issuers") showIssuers()
}

function breadcrumb() {
  return h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "#/profiles" }, "Profiles"), " / Trusted issuers")
}

/** An owner or a viewer: why there is nothing to manage here, and what to do instead. */
function renderNotAdmin() {
  replaceContent(
    main(),
    breadcrumb(),
    h(
      "section",
      { class: "card", "aria-labelledby": "page-title" },
      h("h1", { id: "page-title", tabindex: "-1" }, "Trusted issuers"),
      h("p", null, "Only an admin token registers, changes or lists all trusted issuers: your token may not."),
      h(
        "p",
        { class: "muted" },
        "The issuers your profiles may use are offered in each service's \u201cAdd a federated credential\u201d form, " +
          "with what their tokens must carry. To have another issuer trusted, ask an admin."
      ),
      h("p", null, h("a", { href: "#/profiles" }, "Back to your profiles"))
    )
  )
  focusEl(document.getElementById("page-title"))
}

function render(focus) {
  replaceContent(
    main(),
    breadcrumb(),
    h("div", { class: "page-head" }, h("h1", { id: "page-title", tabindex: "-1" }, "Trusted issuers")),
    h(
      "p",
      { class: "lead" },
      "Platforms whose workload tokens federated credentials accept in place of a secret: a Kubernetes cluster, GitHub Actions, " +
        "a SPIFFE trust domain, any OIDC issuer. Changes apply at once, on every instance."
    ),
    h("section", { id: "issuers-section", class: "card", "aria-labelledby": "issuers-title" }, ...issuersSection()),
    h("div", { id: "issuer-form-slot" }, formSection())
  )
  if (focus) focusEl(document.getElementById("page-title"))
}

const issuersSection = () => [h("h2", { id: "issuers-title" }, "Registered issuers"), issuersTable()]

/** The list in place of "Loading…", leaving the form (and what was typed into it) as it is. */
function showIssuers() {
  const section = document.getElementById("issuers-section")
  if (section === null) render(false)
  else section.replaceChildren(...issuersSection())
}

function formSection() {
  return issuerForm(editing, {
    onDone: async (name, created) => {
      editing = null
      if (await loadIssuers()) render(false)
      focusEl(document.getElementById("issuers-title"))
      announce(created ? `Trusted issuer ${name} registered.` : `Trusted issuer ${name} changed.`)
    },
    onCancel: () => {
      editing = null
      showForm()
      focusEl(document.getElementById("issuers-title"))
    }
  })
}

function showForm() {
  const slot = document.getElementById("issuer-form-slot")
  if (slot !== null) slot.replaceChildren(formSection())
}

/** How the issuer's keys are found, in words. */
export function keysText(issuer) {
  if (issuer.jwks && Array.isArray(issuer.jwks.keys)) {
    const n = issuer.jwks.keys.length
    return `Inline JWKS (${n} ${n === 1 ? "key" : "keys"})`
  }
  return "Discovery: {issuer}/.well-known/openid-configuration"
}

function issuersTable() {
  const issuers = state.issuers
  if (issuers === null) return h("p", { class: "muted" }, "Loading trusted issuers…")
  if (issuers.length === 0) return h("p", { class: "empty" }, "No trusted issuers yet. Register the first one below.")
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "creds issuers" },
      h("caption", null, "Trusted issuers"),
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["Name", "Issuer and keys", "Accepts", "Profiles", "Changed"].map((label) => h("th", { scope: "col" }, label)),
          h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions"))
        )
      ),
      h("tbody", null, issuers.map(issuerRow))
    )
  )
}

function issuerRow(issuer) {
  return h(
    "tr",
    { "data-issuer": issuer.name },
    h("td", { "data-label": "Name" }, h("code", { class: "mono" }, issuer.name)),
    h(
      "td",
      { "data-label": "Issuer and keys" },
      h("code", { class: "mono issuer-url" }, issuer.issuer),
      h("span", { class: "muted small block" }, keysText(issuer)),
      issuer.allow_insecure_loopback ? h("span", { class: "muted small block" }, "Plain http: on loopback allowed") : null
    ),
    h(
      "td",
      { "data-label": "Accepts" },
      h("span", { class: "block" }, issuer.algorithms.join(", ")),
      h("span", { class: "muted small block" }, "audience ", h("code", { class: "mono" }, issuer.audience)),
      h("span", { class: "muted small block" }, `tokens of at most ${issuer.max_token_lifetime_seconds} s`)
    ),
    h(
      "td",
      { "data-label": "Profiles" },
      issuer.profiles.length === 0 ? h("span", { class: "muted" }, "none") : issuer.profiles.join(", ")
    ),
    h("td", { "data-label": "Changed" }, timeEl(issuer.updated_at)),
    h(
      "td",
      { class: "cell-action" },
      h(
        "span",
        { class: "actions issuer-actions" },
        h(
          "button",
          { type: "button", class: "btn btn-small", "aria-label": `Change ${issuer.name}`, onclick: () => startEditing(issuer) },
          "Change"
        ),
        h(
          "button",
          {
            type: "button",
            class: "btn btn-small btn-danger-outline",
            "aria-label": `Delete ${issuer.name}`,
            onclick: (e) => askDelete(issuer, e.currentTarget)
          },
          "Delete"
        )
      )
    )
  )
}

function startEditing(issuer) {
  clearMessages()
  editing = issuer
  showForm()
  focusEl(document.getElementById("issuer-form-title"))
}

function askDelete(issuer, button) {
  clearMessages()
  openDialog({
    title: "Delete this trusted issuer?",
    body: [
      h("p", null, "Trusted issuer ", h("strong", null, issuer.name), " (", h("code", { class: "mono" }, issuer.issuer), ")."),
      h(
        "p",
        null,
        "The server refuses while live federated credentials name it: remove those first, which ends their tokens at once."
      ),
      h("p", { class: "muted" }, "This is not a staged change: it happens when you confirm, and cannot be undone.")
    ],
    confirmLabel: "Delete issuer",
    returnFocus: button,
    onConfirm: async () => {
      try {
        await api("DELETE", `/admin/trusted-issuers/${enc(issuer.name)}`)
      } catch (err) {
        // Credentials still name it: the server's message names them, which is what to act on.
        if (err instanceof ApiError && err.status === 409 && err.description) {
          showAlert(`Trusted issuer ${issuer.name} was not deleted: ${err.description}.`)
          return
        }
        fail(err, `Could not delete trusted issuer ${issuer.name}.`)
        return
      }
      if (editing && editing.name === issuer.name) editing = null
      if (await loadIssuers()) render(false)
      focusEl(document.getElementById("page-title"))
      announce(`Trusted issuer ${issuer.name} deleted.`)
    }
  })
}
