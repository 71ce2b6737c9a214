/*
 * Views outside a profile: sign-in, the list of profiles with the "New profile" form, and the page
 * for an unknown address.
 */
import { ApiError, api, describeError } from "./editor-api.js"
import {
  announce,
  clearMessages,
  focusEl,
  h,
  identifierField,
  main,
  NAME_HINT,
  nextId,
  replaceContent,
  showAlert,
  timeEl
} from "./editor-dom.js"
import { fail, loadSession, route } from "./editor-router.js"
import { secretsPanel } from "./editor-secrets.js"
import { enc, isAdmin, parseRoute, profileHash, state, writeToken } from "./editor-state.js"

function setBusy(button, busy) {
  button.disabled = busy
  if (busy) button.setAttribute("aria-busy", "true")
  else button.removeAttribute("aria-busy")
}

export function renderSignIn() {
  const inputId = nextId("admin-token")
  const hintId = nextId("hint")
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Sign in")
  const input = h("input", {
    id: inputId,
    name: "admin-token",
    type: "password",
    required: true,
    autocomplete: "off",
    spellcheck: "false",
    autocapitalize: "off",
    "aria-describedby": hintId
  })
  const form = h(
    "form",
    { class: "stack", onsubmit: (e) => signIn(e, input, button) },
    h(
      "div",
      { class: "field" },
      h("label", { for: inputId }, "Admin token"),
      input,
      h(
        "p",
        { class: "hint", id: hintId },
        "The server's ADMIN_TOKEN, one of ADMIN_TOKENS, or a token an admin created for you. Set neither, and the server generated one into ",
        h("code", null, "data/admin-token"),
        ": run ",
        h("code", null, "cat data/admin-token"),
        " where it runs. The token is kept in this browser tab only and sent as a bearer token."
      )
    ),
    h("div", { class: "actions" }, button)
  )
  replaceContent(
    main(),
    h(
      "section",
      { class: "card narrow", "aria-labelledby": "signin-title" },
      h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in"),
      h("p", { class: "lead" }, "Manage profiles, environments, services and their client credentials."),
      form
    )
  )
  input.focus()
}

async function signIn(event, input, button) {
  event.preventDefault()
  const token = input.value.trim()
  if (!token) {
    showAlert("Enter the admin token to sign in.")
    input.focus()
    return
  }
  clearMessages()
  setBusy(button, true)
  try {
    await loadSession(token)
    writeToken(token)
    state.profiles = null
    // The address the previous session was on may be one this token cannot see (an admin's
    // tokens page, signed in now as an owner): start from the profiles rather than "Page not found".
    const r = parseRoute(location.hash)
    if (r.name === "unknown" || (r.name === "tokens" && !isAdmin())) history.replaceState(null, "", "#/profiles")
    announce("Signed in.")
    route({ focus: true })
  } catch (err) {
    setBusy(button, false)
    if (err instanceof ApiError && err.status === 401) {
      showAlert("That admin token was rejected by the server. Check it and try again.")
    } else {
      showAlert(`Could not sign in. ${describeError(err)}`)
    }
    input.focus()
    input.select()
  }
}

export async function openProfiles(focus) {
  renderProfiles(focus)
  try {
    const { data } = await api("GET", "/admin/profiles")
    state.profiles = data && Array.isArray(data.profiles) ? data.profiles : []
    const body = document.getElementById("profiles-body")
    if (body && parseRoute(location.hash).name === "profiles") replaceContent(body, profilesBody())
  } catch (err) {
    fail(err, "Could not load the profiles.")
  }
}

function profilesBody() {
  const list = state.profiles
  if (list === null) return h("p", { class: "muted" }, "Loading profiles…")
  if (list.length === 0) {
    return h(
      "p",
      { class: "empty" },
      isAdmin() ? "No profiles yet. Create the first one below." : "Your admin token reaches no profile yet."
    )
  }
  const sorted = [...list].sort((a, b) => String(a.profile).localeCompare(String(b.profile)))
  return h(
    "ul",
    { class: "profile-list" },
    sorted.map((p) =>
      h(
        "li",
        null,
        h("a", { href: profileHash(p.profile), class: "profile-link" }, String(p.profile)),
        h("span", { class: "muted small" }, "Created ", timeEl(p.created_at))
      )
    )
  )
}

function renderProfiles(focus) {
  const inputId = "new-profile-name"
  const hintId = "new-profile-hint"
  const input = identifierField(inputId, "profile", hintId)
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Create profile")
  replaceContent(
    main(),
    h(
      "div",
      { class: "page-head" },
      h("h1", { id: "page-title", tabindex: "-1" }, "Profiles"),
      isAdmin()
        ? h(
          "div",
          { class: "actions" },
          h("a", { href: "#/issuers", class: "btn btn-quiet" }, "Trusted issuers"),
          h("a", { href: "#/tokens", class: "btn btn-quiet" }, "Admin tokens")
        )
        : null
    ),
    secretsPanel(),
    h(
      "section",
      { class: "card", "aria-labelledby": "all-profiles" },
      h("h2", { id: "all-profiles" }, isAdmin() ? "All profiles" : "Your profiles"),
      h("div", { id: "profiles-body" }, profilesBody())
    ),
    // Only an admin creates profiles; the server refuses it to the others.
    !isAdmin() ? null : h(
      "section",
      { class: "card", "aria-labelledby": "new-profile-title" },
      h("h2", { id: "new-profile-title" }, "New profile"),
      h(
        "form",
        { class: "inline-form", onsubmit: (e) => createProfile(e, input, button) },
        h(
          "div",
          { class: "field grow" },
          h("label", { for: inputId }, "Profile name"),
          input,
          h("p", { class: "hint", id: hintId }, NAME_HINT)
        ),
        h("div", { class: "actions" }, button)
      )
    )
  )
  if (focus) focusEl(document.getElementById("page-title"))
}

async function createProfile(event, input, button) {
  event.preventDefault()
  clearMessages()
  const name = input.value.trim()
  input.value = name
  if (!input.reportValidity()) return
  button.disabled = true
  try {
    const { status } = await api("PUT", `/admin/profiles/${enc(name)}`, {})
    location.hash = profileHash(name)
    announce(status === 201 ? `Profile ${name} created.` : `Profile ${name} already exists; opening it.`)
  } catch (err) {
    button.disabled = false
    fail(err, `Could not create profile ${name}.`)
  }
}

export function renderNotFoundRoute() {
  replaceContent(
    main(),
    h(
      "section",
      { class: "card" },
      h("h1", { id: "page-title", tabindex: "-1" }, "Page not found"),
      h("p", null, "There is nothing at this address. ", h("a", { href: "#/profiles" }, "Go to all profiles"), ".")
    )
  )
  focusEl(document.getElementById("page-title"))
}
