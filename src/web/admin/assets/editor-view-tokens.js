/*
 * The admin tokens page (#/tokens), for an admin token only: the stored tokens (never the tokens
 * themselves), a form to create one, shown once with a copy button, and revocation with a
 * confirmation. A new token lives in this module's memory until dismissed, never in storage.
 */
import { api } from "./editor-api.js"
import { openDialog } from "./editor-dialog.js"
import { announce, clearMessages, copyField, focusEl, h, main, replaceContent, showAlert, timeEl } from "./editor-dom.js"
import { fail } from "./editor-router.js"
import { enc, parseRoute } from "./editor-state.js"

/** The token just created, shown until dismissed or the page is left: `{ name, token }`. */
let created = null
let tokens = null

/** Forgets a new token still shown: on leaving the page and on signing out. */
export function forgetCreatedToken() {
  created = null
  tokens = null
}

export async function openTokens(focus) {
  render(focus)
  try {
    const { data } = await api("GET", "/admin/tokens")
    tokens = data && Array.isArray(data.tokens) ? data.tokens : []
    if (parseRoute(location.hash).name === "tokens") showTokens()
  } catch (err) {
    fail(err, "Could not load the admin tokens.")
  }
}

function render(focus) {
  replaceContent(
    main(),
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "#/profiles" }, "Profiles"), " / Admin tokens"),
    h("div", { class: "page-head" }, h("h1", { id: "page-title", tabindex: "-1" }, "Admin tokens")),
    createdPanel(),
    h("section", { id: "tokens-section", class: "card", "aria-labelledby": "tokens-title" }, ...tokensSection()),
    createForm()
  )
  if (focus) focusEl(document.getElementById("page-title"))
}

const tokensSection = () => [h("h2", { id: "tokens-title" }, "Stored tokens"), tokensTable()]

/**
 * The list, once it has arrived, in place of "Loading…": only its section is replaced, so what the
 * admin has already typed into the form below is kept.
 */
function showTokens() {
  const section = document.getElementById("tokens-section")
  if (section === null) render(false)
  else section.replaceChildren(...tokensSection())
}

const scopeText = (token) => (token.profiles === null ? "all profiles" : token.profiles.join(", "))

function tokensTable() {
  if (tokens === null) return h("p", { class: "muted" }, "Loading admin tokens…")
  if (tokens.length === 0) return h("p", { class: "empty" }, "No stored admin tokens. The environment's tokens are not listed here.")
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "creds" },
      h("caption", null, "Stored admin tokens"),
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          ["Name", "Role", "Profiles", "Created", "Last used"].map((label) => h("th", { scope: "col" }, label)),
          h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions"))
        )
      ),
      h(
        "tbody",
        null,
        tokens.map((token) =>
          h(
            "tr",
            null,
            h("td", { "data-label": "Name" }, h("code", { class: "mono" }, token.name)),
            h("td", { "data-label": "Role" }, token.role),
            h("td", { "data-label": "Profiles" }, scopeText(token)),
            h("td", { "data-label": "Created" }, timeEl(token.created_at)),
            h("td", { "data-label": "Last used" }, timeEl(token.last_used_at)),
            h(
              "td",
              { class: "cell-action" },
              h(
                "button",
                {
                  type: "button",
                  class: "btn btn-small btn-danger-outline",
                  "aria-label": `Revoke ${token.name}`,
                  onclick: (e) => askRevoke(token, e.currentTarget)
                },
                "Revoke"
              )
            )
          )
        )
      )
    )
  )
}

function createdPanel() {
  if (created === null) return null
  return h(
    "section",
    { class: "secrets", "aria-labelledby": "new-token-title" },
    h("h2", { id: "new-token-title", tabindex: "-1" }, `New admin token ${created.name}: copy it now`),
    copyField("new-token", "Admin token", created.token, "Admin token", "Copy", { "aria-describedby": "new-token-warning" }, true),
    h(
      "p",
      { class: "warning", id: "new-token-warning" },
      h("span", { "aria-hidden": "true" }, "⚠ "),
      "This token will not be shown again: the server keeps only a digest of it."
    ),
    h("div", { class: "actions" }, h("button", { type: "button", class: "btn", onclick: dismissCreated }, "Dismiss"))
  )
}

function dismissCreated() {
  created = null
  clearMessages()
  render(true)
  announce("The token is no longer shown.")
}

function createForm() {
  const name = h("input", {
    id: "token-name",
    name: "name",
    type: "text",
    required: true,
    pattern: "[A-Za-z0-9._\\-]{1,64}",
    autocomplete: "off",
    spellcheck: "false"
  })
  const role = h(
    "select",
    { id: "token-role", name: "role", onchange: () => (profilesField.hidden = role.value === "admin") },
    h("option", { value: "owner" }, "Owner: its profiles, everything but creating or deleting them"),
    h("option", { value: "viewer" }, "Viewer: its profiles, reads only"),
    h("option", { value: "introspector" }, "Introspector: token introspection for its profiles (resource servers)"),
    h("option", { value: "admin" }, "Admin: everything")
  )
  const profiles = h("input", {
    id: "token-profiles",
    name: "profiles",
    type: "text",
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "token-profiles-hint"
  })
  const profilesField = h(
    "div",
    { class: "field" },
    h("label", { for: "token-profiles" }, "Profiles"),
    profiles,
    h("p", { class: "hint", id: "token-profiles-hint" }, "Profile names, separated by commas.")
  )
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Create token")
  return h(
    "section",
    { class: "card", "aria-labelledby": "new-token-form-title" },
    h("h2", { id: "new-token-form-title" }, "New admin token"),
    h(
      "form",
      { class: "stack", onsubmit: (e) => createToken(e, name, role, profiles, button) },
      h(
        "div",
        { class: "field" },
        h("label", { for: "token-name" }, "Name"),
        name,
        h("p", { class: "hint" }, "1-64 letters, digits, '.', '_' or '-'; the audit trail names its changes so.")
      ),
      h("div", { class: "field" }, h("label", { for: "token-role" }, "Role"), role),
      profilesField,
      h("div", { class: "actions" }, button)
    )
  )
}

async function createToken(event, nameInput, roleSelect, profilesInput, button) {
  event.preventDefault()
  clearMessages()
  if (!nameInput.reportValidity()) return
  const role = roleSelect.value
  const profiles = profilesInput.value.split(",").map((p) => p.trim()).filter((p) => p !== "")
  if (role !== "admin" && profiles.length === 0) {
    showAlert("An owner, viewer or introspector token needs at least one profile.")
    profilesInput.focus()
    return
  }
  button.disabled = true
  try {
    const body = role === "admin" ? { name: nameInput.value, role } : { name: nameInput.value, role, profiles }
    const { data } = await api("POST", "/admin/tokens", body)
    created = { name: data.name, token: data.token }
    const { data: list } = await api("GET", "/admin/tokens")
    tokens = list && Array.isArray(list.tokens) ? list.tokens : tokens
    render(false)
    focusEl(document.getElementById("new-token-title"))
    announce(`Admin token ${data.name} created. Copy it now: it will not be shown again.`)
  } catch (err) {
    button.disabled = false
    fail(err, `Could not create admin token ${nameInput.value}.`)
  }
}

function askRevoke(token, button) {
  clearMessages()
  openDialog({
    title: "Revoke this admin token?",
    body: [
      h(
        "p",
        null,
        "Admin token ",
        h("strong", null, token.name),
        ` (${token.role}, ${scopeText(token)}) is refused from its next request, by every instance.`
      ),
      h("p", { class: "muted" }, "This cannot be undone; create another token if it is needed again.")
    ],
    confirmLabel: "Revoke token",
    returnFocus: button,
    onConfirm: async () => {
      try {
        await api("DELETE", `/admin/tokens/${enc(token.name)}`)
      } catch (err) {
        fail(err, `Could not revoke ${token.name}.`)
        return
      }
      if (created && created.name === token.name) created = null
      tokens = tokens ? tokens.filter((t) => t.name !== token.name) : tokens
      render(false)
      focusEl(document.getElementById("page-title"))
      announce(`Admin token ${token.name} revoked.`)
    }
  })
}
