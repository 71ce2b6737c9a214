/*
 * The profile editor page: loading the profile, rendering it (environments, services, the add forms
 * and the save bar), saving the staged changes, and deleting environments.
 */
import { ApiError, api } from "./editor-api.js"
import { isDirty, normalizeDoc, overLimit, plural, reconcile, saveRequest, summaryText } from "./editor-changes.js"
import { openDialog } from "./editor-dialog.js"
import { announce, clearMessages, focusEl, focusKey, h, main, replaceContent, timeEl } from "./editor-dom.js"
import { fail } from "./editor-router.js"
import { keepSecrets, secretsPanel } from "./editor-secrets.js"
import { enc, isAdmin, mayChange, parseRoute, profilePath, resetStaged, state, updateTitle } from "./editor-state.js"
import { loadProfileIssuers } from "./editor-view-federated.js"
import { addForms } from "./editor-view-forms.js"
import { historySection, refreshHistory } from "./editor-view-history.js"
import { serviceLabel, serviceSection } from "./editor-view-service.js"

export async function openEditor(profile, focus) {
  if (state.staged.profile !== profile) resetStaged(profile)
  state.doc = null
  renderEditorLoading(profile)
  // The federated credential forms offer the issuers that allow the profile.
  const issuers = loadProfileIssuers(profile)
  if (!(await loadProfile(profile))) return
  await issuers
  renderEditor()
  if (focus) focusEl(document.getElementById("page-title"))
}

/** Fetches the profile document; false when it failed (and the failure was reported). */
export async function loadProfile(profile) {
  state.loadingProfile = profile
  try {
    const { data } = await api("GET", profilePath(profile))
    if (state.loadingProfile !== profile) return false
    state.doc = normalizeDoc(data, profile)
    state.staged = reconcile(state.staged, state.doc)
    // Every change the page makes reloads the profile: its history follows.
    refreshHistory(profile)
    return true
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && parseRoute(location.hash).profile === profile) {
      state.doc = null
      renderEditorMissing(profile)
      return false
    }
    fail(err, `Could not load profile ${profile}.`)
    return false
  } finally {
    if (state.loadingProfile === profile) state.loadingProfile = null
  }
}

/** Reloads the profile after a change made on the server and renders it; false when that failed. */
export async function reloadProfile() {
  if (!state.doc || !(await loadProfile(state.doc.profile))) return false
  renderEditor()
  return true
}

function renderEditorLoading(profile) {
  replaceContent(
    main(),
    breadcrumb(),
    h("div", { class: "page-head" }, h("h1", { id: "page-title", tabindex: "-1" }, profile)),
    h("p", { class: "muted" }, "Loading profile…")
  )
}

function renderEditorMissing(profile) {
  replaceContent(
    main(),
    breadcrumb(),
    h(
      "section",
      { class: "card" },
      h("h1", { id: "page-title", tabindex: "-1" }, "Profile not found"),
      h("p", null, "There is no profile named ", h("strong", null, profile), ". It may have been deleted."),
      h("p", null, h("a", { href: "#/profiles" }, "Back to all profiles"))
    )
  )
  focusEl(document.getElementById("page-title"))
}

function breadcrumb() {
  return h(
    "nav",
    { class: "breadcrumb", "aria-label": "Breadcrumb" },
    h("a", { href: "#/profiles" }, h("span", { "aria-hidden": "true" }, "← "), "All profiles")
  )
}

/** The values fields held when rendered, to tell what the operator changed since. */
const rendered = new WeakMap()
const keptValue = (el) => (el.tagName === "DETAILS" ? el.open : el.type === "checkbox" ? el.checked : el.value)

/**
 * Renders the whole editor from `state`. What was typed into forms (elements with `data-keep`),
 * which disclosures were open, and the focus survive the re-render.
 */
export function renderEditor() {
  const doc = state.doc
  if (!doc) return
  const envCount = doc.environments.length
  const serviceCount = doc.environments.reduce((n, e) => n + e.services.length, 0)
  const content = [
    breadcrumb(),
    h(
      "div",
      { class: "page-head" },
      h(
        "div",
        null,
        h("p", { class: "kicker" }, "Profile"),
        h("h1", { id: "page-title", tabindex: "-1" }, doc.profile),
        h(
          "p",
          { class: "muted small" },
          "Created ",
          timeEl(doc.created_at),
          ` · ${plural(envCount, "environment", "environments")} · ${plural(serviceCount, "service", "services")}`
        ),
        lifetimePolicy(doc),
        upstreamOrigins(doc)
      ),
      h("button", { type: "button", class: "btn btn-quiet", "data-focus": "refresh", onclick: refreshProfile }, "Refresh")
    ),
    // Two ways of saving on one page: say which is which before anyone wonders.
    !mayChange() ? h("p", { class: "save-rules" }, "Your admin token may read this profile, not change it.") : h(
      "p",
      { class: "save-rules", id: "save-rules" },
      h("strong", null, "Saved at once:"),
      " environments and services you add or delete. ",
      h("strong", null, "Saved with \u201cSave profile\u201d:"),
      " credentials you add or remove, all together, so a rotation happens in one step."
    ),
    secretsPanel(),
    envCount === 0
      ? h("p", { class: "empty card" }, "This profile has no environments yet. Add one below, then add services to it.")
      : doc.environments.map(environmentSection),
    mayChange() ? addForms(doc) : null,
    historySection(),
    mayChange() ? saveBar() : null
  ]
  // Only what the operator changed is kept, so fresh values from the server show everywhere else.
  const kept = new Map()
  for (const el of document.querySelectorAll("[data-keep]")) {
    const value = keptValue(el)
    if (el.id && value !== rendered.get(el)) kept.set(el.id, value)
  }
  const active = /** @type {HTMLElement | null} */ (document.activeElement)
  const activeId = active && active !== document.body ? active.id : ""
  const activeKey = active && active.dataset ? active.dataset.focus : undefined
  replaceContent(main(), ...content)
  for (const [id, value] of kept) {
    const el = /** @type {any} */ (document.getElementById(id))
    if (!el || !el.hasAttribute("data-keep")) continue
    if (el.tagName === "DETAILS") el.open = value
    else if (el.type === "checkbox") el.checked = value
    else if (el.tagName === "SELECT" && !Array.from(el.options).some((o) => o.value === value)) continue
    else {
      el.value = value
      if (el.tagName === "SELECT") el.dispatchEvent(new Event("change"))
      // What depends on a kept text (the key form's button) follows it as it does typing.
      if (el.tagName === "TEXTAREA") el.dispatchEvent(new Event("input"))
    }
  }
  for (const el of document.querySelectorAll("[data-keep]")) if (!kept.has(el.id)) rendered.set(el, keptValue(el))
  if (activeId && document.getElementById(activeId)) document.getElementById(activeId).focus()
  else if (activeKey) focusKey(activeKey)
  updateTitle()
}

function environmentSection(env) {
  const titleId = `env-title-${env.name}`
  return h(
    "section",
    { class: "environment", "aria-labelledby": titleId },
    h(
      "div",
      { class: "env-head" },
      h(
        "h2",
        { id: titleId, class: "env-title" },
        h("span", { class: "kicker" }, "Environment "),
        h("span", { class: "env-name" }, env.name)
      ),
      !mayChange() ? null : h(
        "button",
        {
          type: "button",
          class: "btn btn-small btn-danger-outline",
          "aria-label": `Delete environment ${env.name}`,
          "data-focus": `env-delete:${env.name}`,
          disabled: state.saving,
          onclick: (e) => askDeleteEnvironment(env, e.currentTarget)
        },
        "Delete environment"
      )
    ),
    env.services.length === 0
      ? h("p", { class: "empty card" }, "No services in this environment yet.")
      : env.services.map((s) => serviceSection(env.name, s))
  )
}

function askDeleteEnvironment(env, button) {
  clearMessages()
  const credentials = env.services.reduce((n, s) => n + s.credentials.length, 0)
  openDialog({
    title: "Delete this environment?",
    body: [
      h(
        "p",
        null,
        "Environment ",
        h("strong", null, env.name),
        ` and its ${plural(env.services.length, "service", "services")} are deleted.`
      ),
      h(
        "p",
        null,
        credentials > 0
          ? `${credentials === 1 ? "Its credential is" : `Its ${credentials} credentials are`} deleted with it: every token issued with ${
            credentials === 1 ? "it" : "them"
          } stops working at once.`
          : "It holds no credential."
      ),
      h("p", { class: "muted" }, "This is not a staged change: it happens when you confirm, and cannot be undone.")
    ],
    confirmLabel: "Delete environment",
    returnFocus: button,
    onConfirm: async () => {
      const profile = state.doc.profile
      try {
        await api("DELETE", `${profilePath(profile)}/environments/${enc(env.name)}`)
      } catch (err) {
        fail(err, `Could not delete environment ${env.name}.`)
        return
      }
      if (state.lastEnvironment === env.name) state.lastEnvironment = null
      if (await reloadProfile()) focusEl(document.getElementById("page-title"))
      announce(`Environment ${env.name} deleted.`)
    }
  })
}

function saveBar() {
  const total = state.staged.adds.length + state.staged.removes.length
  return h(
    "div",
    { class: `savebar${total ? " dirty" : ""}` },
    h(
      "div",
      { class: "savebar-inner" },
      h("p", { class: "savebar-summary", tabindex: "-1", "data-focus": "summary", id: "pending-summary" }, summaryText(state.staged)),
      h(
        "div",
        { class: "actions" },
        total
          ? h("button", { type: "button", class: "btn btn-quiet", disabled: state.saving, onclick: discardChanges }, "Discard changes")
          : null,
        h(
          "button",
          {
            type: "button",
            class: "btn btn-primary",
            disabled: state.saving || total === 0,
            "aria-busy": state.saving ? "true" : null,
            "aria-describedby": "pending-summary",
            "data-focus": "save",
            onclick: saveProfile
          },
          state.saving ? "Saving…" : "Save profile"
        )
      )
    )
  )
}

function discardChanges() {
  if (!isDirty(state.staged)) return
  if (!window.confirm("Discard all unsaved changes to this profile?")) return
  clearMessages()
  resetStaged(state.doc ? state.doc.profile : null)
  renderEditor()
  focusKey("summary")
  announce("Unsaved changes discarded.")
}

async function saveProfile() {
  if (state.saving || !isDirty(state.staged) || !state.doc) return
  clearMessages()
  const profile = state.doc.profile
  const names = new Map()
  for (const e of state.doc.environments) for (const s of e.services) names.set(`${e.name}\n${s.uuid}`, serviceLabel(s))
  state.saving = true
  renderEditor()
  let result
  try {
    result = (await api("POST", `${profilePath(profile)}/save`, saveRequest(state.staged))).data || {}
  } catch (err) {
    state.saving = false
    // A conflict or a missing item means the page is out of date: show what the server holds now.
    const stale = err instanceof ApiError && (err.status === 409 || err.status === 404)
    if (stale) await loadProfile(profile)
    renderEditor()
    focusKey("save", "summary")
    const over = stale && state.doc ? overLimit(state.staged, state.doc).length : 0
    const suffix = stale
      ? `Nothing was changed on the server; the profile was reloaded from it, and your staged changes that still apply are still here.${
        over ? ` ${plural(over, "service", "services")} would now go over the limit.` : ""
      }`
      : "Nothing was changed on the server; your staged changes are still here."
    fail(err, "The profile was not saved.", suffix)
    return
  }
  state.saving = false
  resetStaged(profile)
  const created = [
    ...(Array.isArray(result.created) ? result.created : []),
    ...(Array.isArray(result.created_key_credentials) ? result.created_key_credentials : [])
  ]
  const removed = Array.isArray(result.removed) ? result.removed : []
  const secrets = keepSecrets(profile, created, names)
  await loadProfile(profile)
  renderEditor()
  const parts = []
  if (created.length) parts.push(`${plural(created.length, "credential", "credentials")} created`)
  if (removed.length) parts.push(`${plural(removed.length, "credential", "credentials")} removed`)
  announce(`Profile saved${parts.length ? `: ${parts.join(", ")}` : ""}.${secrets ? " Copy the new secret now." : ""}`)
  if (secrets) focusEl(document.getElementById("secrets-title"))
  else focusKey("summary")
}

/** The origins the profile's proxies may target besides the deployment's: the operator's decision, shown read-only. */
function upstreamOrigins(doc) {
  if (!Array.isArray(doc.upstream_origins) || doc.upstream_origins.length === 0) return null
  return h("p", { class: "muted small" }, `Proxy services may also target (set by an admin): ${doc.upstream_origins.join(", ")}`)
}

/** The profile's credential policy: shown, and set at once (`PUT /admin/profiles/{profile}`) by who may change it. */
function lifetimePolicy(doc) {
  const days = doc.credential_max_lifetime_days
  const text = days === null ? "New credentials never expire unless given an expiry." : `New credentials expire within ${days} days.`
  // Setting it is a PUT of the profile, an admin's decision: an owner sees the policy, no control.
  if (!isAdmin()) return h("p", { class: "muted small" }, text)
  const input = h("input", {
    id: "lifetime-days",
    type: "number",
    min: "1",
    max: "3650",
    step: "1",
    placeholder: "none",
    value: days === null ? "" : String(days),
    class: "lifetime-input"
  })
  const onSubmit = async (event) => {
    event.preventDefault()
    clearMessages()
    if (!input.reportValidity()) return
    const value = input.value.trim()
    try {
      await api("PUT", profilePath(doc.profile), { credential_max_lifetime_days: value === "" ? null : Number(value) })
    } catch (err) {
      fail(err, "Could not set the credential lifetime.")
      return
    }
    if (await reloadProfile()) focusKey("lifetime")
    announce(value === "" ? "Credential lifetime removed." : `New credentials now expire within ${value} days.`)
  }
  return h(
    "form",
    { class: "lifetime-policy small", onsubmit: onSubmit },
    h("span", { class: "muted" }, text, " "),
    h("label", { for: "lifetime-days" }, "Maximum lifetime (days, empty: none) "),
    input,
    h("button", { type: "submit", class: "btn btn-small", "data-focus": "lifetime" }, "Set")
  )
}

async function refreshProfile() {
  if (!state.doc) return
  clearMessages()
  if (!(await reloadProfile())) return
  focusKey("refresh")
  announce("Profile refreshed.")
}
