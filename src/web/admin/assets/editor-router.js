/*
 * Which view the address shows, signing out, and the one way failures are reported.
 */
import { api, ApiError, describeError } from "./editor-api.js"
import { closeDialog } from "./editor-dialog.js"
import { announce, clearMessages, showAlert } from "./editor-dom.js"
import { wipeSecrets } from "./editor-secrets.js"
import { dirty, isAdmin, parseRoute, resetStaged, state, updateTitle, writeToken } from "./editor-state.js"
import { openEditor } from "./editor-view-editor.js"
import { openProfiles, renderNotFoundRoute, renderSignIn } from "./editor-view-profiles.js"
import { openIssuers } from "./editor-view-issuers.js"
import { forgetCreatedToken, openTokens } from "./editor-view-tokens.js"

export const LEAVE_MESSAGE = "This profile has unsaved changes. Leave and discard them?"

let currentHash = location.hash

/** Shows the view of the current address (the sign-in form without a token). */
export function route(options) {
  const focus = !!(options && options.focus)
  document.getElementById("sign-out").hidden = !state.token
  if (!state.token) {
    renderSignIn()
    updateTitle()
    return
  }
  // After a reload the token is known, not yet what it may do.
  if (!state.session) {
    loadSession().then((loaded) => loaded && route(options))
    return
  }
  renderWho()
  const r = parseRoute(location.hash)
  if (r.name !== "tokens") forgetCreatedToken()
  if (r.name === "editor") openEditor(r.profile, focus)
  else if (r.name === "profiles") openProfiles(focus)
  else if (r.name === "tokens" && isAdmin()) openTokens(focus)
  // Not only an admin's: any other token is told why it cannot manage issuers.
  else if (r.name === "issuers") openIssuers(focus)
  else renderNotFoundRoute()
  updateTitle()
}

/** Asks the server what the token is; false when it could not (the failure is reported). */
export async function loadSession(token) {
  try {
    const { data } = await api("GET", "/admin/session", undefined, token)
    state.session = data
    return true
  } catch (err) {
    if (token === undefined) fail(err, "Could not load your session.")
    else throw err
    return false
  }
}

/** Who is signed in, beside the sign-out button. */
function renderWho() {
  const who = document.getElementById("who")
  if (!who) return
  const session = state.session
  who.hidden = !session
  who.textContent = session
    ? `${session.name} · ${session.role}${session.profiles ? ` of ${session.profiles.join(", ")}` : ""}`
    : ""
}

function onHashChange() {
  const next = parseRoute(location.hash)
  const staysInEditor = next.name === "editor" && next.profile === state.staged.profile
  if (state.token && dirty() && !staysInEditor) {
    if (!window.confirm(LEAVE_MESSAGE)) {
      // Put the address back without triggering another hashchange.
      history.replaceState(null, "", `${location.pathname}${location.search}${currentHash}`)
      return
    }
    resetStaged(null)
  }
  currentHash = location.hash
  clearMessages()
  route({ focus: true })
}

/** Explicit sign-out forgets everything; a rejected token keeps staged work and secrets in memory. */
export function signOut(options) {
  const rejected = !!(options && options.rejected)
  if (!rejected) {
    if (
      (dirty() || state.secrets.length > 0) && !window.confirm(
        "Sign out? Unsaved changes and any secret still shown on this page will be lost."
      )
    ) return
    resetStaged(null)
    wipeSecrets()
  }
  closeDialog(false, true)
  writeToken(null)
  forgetCreatedToken()
  state.session = null
  state.profiles = null
  state.doc = null
  state.history = null
  state.issuers = null
  state.profileIssuers = null
  renderWho()
  route()
  if (rejected) showAlert("Your admin token was rejected; sign in again.")
  else announce("Signed out.")
}

/** Reports a failed call; a rejected admin token signs out. */
export function fail(err, prefix, suffix) {
  if (err instanceof ApiError && err.status === 401) {
    signOut({ rejected: true })
    return
  }
  showAlert([prefix, describeError(err), suffix].filter(Boolean).join(" "))
}

export function start() {
  window.addEventListener("hashchange", onHashChange)
  window.addEventListener("beforeunload", (e) => {
    if (dirty()) {
      e.preventDefault()
      e.returnValue = LEAVE_MESSAGE
      return LEAVE_MESSAGE
    }
    return undefined
  })
  document.getElementById("sign-out").addEventListener("click", () => signOut())
  if (!location.hash) history.replaceState(null, "", `${location.pathname}${location.search}#/profiles`)
  currentHash = location.hash
  route()
}
