/*
 * service-auth profile editor: a dependency-free single page over the admin JSON API (docs/contract.md §3).
 *
 * Rules this file keeps:
 * - The admin token lives in sessionStorage only and travels only as `Authorization: Bearer`.
 * - New client secrets live only in the `state.secrets` array in memory: never in storage, the URL
 *   or the DOM after the panel is dismissed, so a reload shows them no more.
 * - Every piece of server or user data is rendered through text nodes (`textContent`), never HTML.
 */
;(function () {
  "use strict"

  const TOKEN_KEY = "service-auth.admin-token"
  const MAX_CREDENTIALS = 2
  const NAME_PATTERN = "[A-Za-z0-9][A-Za-z0-9._\\-]{0,127}"
  const NAME_HINT = "Letters, digits, '.', '_' or '-', starting with a letter or digit (at most 128)."
  const LEAVE_MESSAGE = "This profile has unsaved changes. Leave and discard them?"
  const AUTH_LABELS = { oauth: "OAuth 2.0 (Client Credentials)", none: "None" }

  /** Everything the page knows. Secrets are here and nowhere else. */
  const state = {
    token: readToken(),
    profiles: null,
    doc: null,
    loadingProfile: null,
    staged: { profile: null, adds: [], removes: [] },
    secrets: [],
    saving: false
  }

  let uid = 0
  const nextId = (prefix) => `${prefix}-${++uid}`
  let currentHash = location.hash
  let addSeq = 0
  /** The environment last used in the add forms, preselected in the "New service" form. */
  let lastEnvironment = null

  // ---------------------------------------------------------------------------------------------
  // Small helpers

  function readToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY)
    } catch {
      return null
    }
  }

  function writeToken(token) {
    try {
      if (token === null) sessionStorage.removeItem(TOKEN_KEY)
      else sessionStorage.setItem(TOKEN_KEY, token)
    } catch {
      /* storage unavailable: the token then lives for this page only */
    }
    state.token = token
  }

  /** A text field for a profile or environment name, checked as the server checks it. */
  function identifierField(id, name, hintId) {
    return h("input", {
      id,
      name,
      type: "text",
      required: true,
      pattern: NAME_PATTERN,
      maxlength: "128",
      autocomplete: "off",
      spellcheck: "false",
      autocapitalize: "off",
      "aria-describedby": hintId
    })
  }

  /** Builds an element; strings among the children become text nodes (never parsed as HTML). */
  function h(tag, props, ...children) {
    const el = document.createElement(tag)
    let value
    if (props) {
      for (const [key, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue
        if (key === "class") el.className = v
        else if (key === "value") value = v
        else if (key.startsWith("on") && typeof v === "function") el.addEventListener(key.slice(2), v)
        else if (key === "dataset") Object.assign(el.dataset, v)
        else el.setAttribute(key, v === true ? "" : String(v))
      }
    }
    append(el, children)
    if (value !== undefined) el.value = value
    return el
  }

  function append(el, children) {
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue
      if (Array.isArray(child)) append(el, child)
      else if (child instanceof Node) el.appendChild(child)
      else el.appendChild(document.createTextNode(String(child)))
    }
  }

  const enc = encodeURIComponent
  const profileHash = (profile) => `#/profiles/${enc(profile)}`
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`

  const dateFormat = (() => {
    try {
      return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" })
    } catch {
      return null
    }
  })()

  function timeEl(iso) {
    if (iso === null || iso === undefined) return h("span", { class: "never" }, "never")
    const date = new Date(iso)
    if (Number.isNaN(date.getTime()) || !dateFormat) return h("span", null, String(iso))
    return h("time", { datetime: String(iso), title: String(iso) }, dateFormat.format(date))
  }

  function focusEl(el) {
    if (!el) return false
    if (!el.hasAttribute("tabindex") && !/^(A|BUTTON|INPUT|SELECT|TEXTAREA)$/.test(el.tagName)) {
      el.setAttribute("tabindex", "-1")
    }
    el.focus()
    return document.activeElement === el
  }

  /** Focuses the first enabled element carrying one of the given `data-focus` keys. */
  function focusKey(...keys) {
    for (const key of keys) {
      if (!key) continue
      const el = document.querySelector(`[data-focus="${CSS.escape(key)}"]`)
      if (el && !el.disabled && focusEl(el)) return true
    }
    return false
  }

  const main = () => document.getElementById("main")

  // ---------------------------------------------------------------------------------------------
  // Messages (aria-live regions that exist from page load)

  function showAlert(text) {
    const el = document.getElementById("alert")
    const status = document.getElementById("status")
    status.textContent = ""
    // Clear first so that the same message twice is announced again.
    el.textContent = ""
    window.setTimeout(() => {
      el.textContent = ""
      el.appendChild(h("span", { class: "alert-icon", "aria-hidden": "true" }, "!"))
      el.appendChild(h("span", null, text))
    }, 30)
  }

  function announce(text) {
    const el = document.getElementById("status")
    el.textContent = ""
    window.setTimeout(() => {
      el.textContent = text
    }, 30)
  }

  function clearMessages() {
    document.getElementById("alert").textContent = ""
    document.getElementById("status").textContent = ""
  }

  // ---------------------------------------------------------------------------------------------
  // The JSON API

  class ApiError extends Error {
    constructor(kind, status, code, description) {
      super(description || code || kind)
      this.kind = kind
      this.status = status
      this.code = code
      this.description = description
    }
  }

  async function api(method, path, body, token) {
    const headers = { Accept: "application/json", Authorization: `Bearer ${token ?? state.token ?? ""}` }
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" }
    if (body !== undefined) {
      headers["Content-Type"] = "application/json"
      init.body = JSON.stringify(body)
    }
    let response
    try {
      response = await fetch(path, init)
    } catch {
      throw new ApiError("network", 0, null, null)
    }
    let data = null
    try {
      const text = await response.text()
      if (text) data = JSON.parse(text)
    } catch {
      data = null
    }
    if (response.ok) return { status: response.status, data }
    const code = data && typeof data.error === "string" ? data.error : null
    const description = data && typeof data.error_description === "string" ? data.error_description : null
    throw new ApiError("http", response.status, code, description)
  }

  /** One sentence (or two) saying what went wrong, for people rather than programs. */
  function describeError(err) {
    if (!(err instanceof ApiError)) return "Something went wrong in the page. Reload it and try again."
    if (err.kind === "network") {
      return "The server could not be reached. Check that it is running and your connection works, then try again."
    }
    const detail = err.description ? ` (${err.description})` : ""
    switch (err.status) {
      case 400:
        return `The server refused the request as invalid${detail}.`
      case 401:
        return "Your admin token was rejected; sign in again."
      case 404:
        return `The server could not find it${detail}. Someone may have deleted it; refresh the profile.`
      case 409:
        if (err.code === "credential_limit_exceeded") {
          return `A service holds at most ${MAX_CREDENTIALS} credentials, and this change would go over that limit${detail}. Remove a credential and save before adding another.`
        }
        return `The change conflicts with the current state on the server${detail}. Refresh the profile and try again.`
      case 413:
        return "The request was too large for the server."
      case 503:
        return `The server is running but its database is unavailable${detail}. Try again in a moment.`
      default:
        return `The server answered with an error (HTTP ${err.status}${err.code ? `, ${err.code}` : ""})${detail}.`
    }
  }

  /** Reports a failed call; a rejected admin token signs out. */
  function fail(err, prefix, suffix) {
    if (err instanceof ApiError && err.status === 401) {
      signOut({ rejected: true })
      return
    }
    showAlert([prefix, describeError(err), suffix].filter(Boolean).join(" "))
  }

  // ---------------------------------------------------------------------------------------------
  // Staged changes

  const isDirty = () => state.staged.adds.length > 0 || state.staged.removes.length > 0

  function resetStaged(profile) {
    state.staged = { profile: profile ?? null, adds: [], removes: [] }
  }

  const sameService = (a, env, uuid) => a.environment === env && a.service_uuid === uuid

  function stagedFor(env, uuid) {
    return {
      adds: state.staged.adds.filter((a) => sameService(a, env, uuid)),
      removes: state.staged.removes.filter((r) => sameService(r, env, uuid))
    }
  }

  function isStagedRemoval(env, uuid, clientId) {
    return state.staged.removes.some((r) => sameService(r, env, uuid) && r.client_id === clientId)
  }

  /** Live − staged removals + staged adds: what the service would hold after saving. */
  function projectedCount(env, service) {
    const staged = stagedFor(env, service.uuid)
    const live = service.credentials.length
    const removed = staged.removes.filter((r) => service.credentials.some((c) => c.client_id === r.client_id)).length
    return live - removed + staged.adds.length
  }

  /** Drops staged changes that no longer apply to the freshly loaded document. */
  function reconcileStaged(doc) {
    if (state.staged.profile !== doc.profile) {
      resetStaged(doc.profile)
      return
    }
    const findService = (env, uuid) => {
      const e = doc.environments.find((x) => x.name === env)
      return e ? e.services.find((s) => s.uuid === uuid) : undefined
    }
    state.staged.removes = state.staged.removes.filter((r) => {
      const s = findService(r.environment, r.service_uuid)
      return !!s && s.credentials.some((c) => c.client_id === r.client_id)
    })
    state.staged.adds = state.staged.adds.filter((a) => !!findService(a.environment, a.service_uuid))
  }

  function updateTitle() {
    const route = parseRoute(location.hash)
    const base = "Profile editor · service-auth"
    let title = base
    if (!state.token) title = `Sign in · ${base}`
    else if (route.name === "editor") title = `${route.profile} · ${base}`
    else if (route.name === "profiles") title = `Profiles · ${base}`
    document.title = (isDirty() ? "• " : "") + title
  }

  // ---------------------------------------------------------------------------------------------
  // Routing

  function parseRoute(hash) {
    const path = (hash || "").replace(/^#/, "")
    if (path === "" || path === "/" || path === "/profiles" || path === "/profiles/") return { name: "profiles" }
    const m = /^\/profiles\/([^/]+)\/?$/.exec(path)
    if (m) {
      try {
        return { name: "editor", profile: decodeURIComponent(m[1]) }
      } catch {
        return { name: "unknown" }
      }
    }
    return { name: "unknown" }
  }

  function onHashChange() {
    const next = parseRoute(location.hash)
    const staysInEditor = next.name === "editor" && next.profile === state.staged.profile
    if (state.token && isDirty() && !staysInEditor) {
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

  function route(options) {
    const focus = !!(options && options.focus)
    document.getElementById("sign-out").hidden = !state.token
    if (!state.token) {
      renderSignIn()
      updateTitle()
      return
    }
    const r = parseRoute(location.hash)
    if (r.name === "editor") {
      openEditor(r.profile, focus)
    } else if (r.name === "profiles") {
      openProfiles(focus)
    } else {
      renderNotFoundRoute()
    }
    updateTitle()
  }

  // ---------------------------------------------------------------------------------------------
  // Sign in / out

  function renderSignIn() {
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
          "The token configured on the server as ADMIN_TOKEN. It is kept in this browser tab only and sent as a bearer token."
        )
      ),
      h("div", { class: "actions" }, button)
    )
    main().replaceChildren(
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
    button.disabled = true
    form_busy(button, true)
    try {
      const { data } = await api("GET", "/admin/profiles", undefined, token)
      writeToken(token)
      state.profiles = data && Array.isArray(data.profiles) ? data.profiles : []
      announce("Signed in.")
      route({ focus: true })
    } catch (err) {
      button.disabled = false
      form_busy(button, false)
      if (err instanceof ApiError && err.status === 401) {
        showAlert("That admin token was rejected by the server. Check it and try again.")
      } else {
        showAlert(`Could not sign in. ${describeError(err)}`)
      }
      input.focus()
      input.select()
    }
  }

  function form_busy(button, busy) {
    if (busy) button.setAttribute("aria-busy", "true")
    else button.removeAttribute("aria-busy")
  }

  /** Explicit sign-out forgets everything; a rejected token keeps staged work and secrets in memory. */
  function signOut(options) {
    const rejected = !!(options && options.rejected)
    if (!rejected) {
      if ((isDirty() || state.secrets.length > 0) && !window.confirm(
        "Sign out? Unsaved changes and any secret still shown on this page will be lost."
      )) return
      resetStaged(null)
      wipeSecrets()
    }
    closeDialog(false, true)
    writeToken(null)
    state.profiles = null
    state.doc = null
    route()
    if (rejected) showAlert("Your admin token was rejected; sign in again.")
    else announce("Signed out.")
  }

  // ---------------------------------------------------------------------------------------------
  // Profiles list

  async function openProfiles(focus) {
    renderProfiles(focus)
    try {
      const { data } = await api("GET", "/admin/profiles")
      state.profiles = data && Array.isArray(data.profiles) ? data.profiles : []
      const body = document.getElementById("profiles-body")
      if (body && parseRoute(location.hash).name === "profiles") body.replaceChildren(profilesBody())
    } catch (err) {
      fail(err, "Could not load the profiles.")
    }
  }

  function profilesBody() {
    const list = state.profiles
    if (list === null) return h("p", { class: "muted" }, "Loading profiles…")
    if (list.length === 0) return h("p", { class: "empty" }, "No profiles yet. Create the first one below.")
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
    main().replaceChildren(
      h("div", { class: "page-head" }, h("h1", { id: "page-title", tabindex: "-1" }, "Profiles")),
      state.secrets.length > 0 ? secretsPanel() : null,
      h(
        "section",
        { class: "card", "aria-labelledby": "all-profiles" },
        h("h2", { id: "all-profiles" }, "All profiles"),
        h("div", { id: "profiles-body" }, profilesBody())
      ),
      h(
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

  function renderNotFoundRoute() {
    main().replaceChildren(
      h(
        "section",
        { class: "card" },
        h("h1", { id: "page-title", tabindex: "-1" }, "Page not found"),
        h("p", null, "There is nothing at this address. ", h("a", { href: "#/profiles" }, "Go to all profiles"), ".")
      )
    )
    focusEl(document.getElementById("page-title"))
  }

  // ---------------------------------------------------------------------------------------------
  // Profile editor

  async function openEditor(profile, focus) {
    if (state.staged.profile !== profile) resetStaged(profile)
    state.doc = null
    renderEditorLoading(profile)
    const ok = await loadProfile(profile)
    if (!ok) return
    renderEditor()
    if (focus) focusEl(document.getElementById("page-title"))
  }

  /** Fetches the profile document; false when it failed (and the failure was reported). */
  async function loadProfile(profile) {
    state.loadingProfile = profile
    try {
      const { data } = await api("GET", `/admin/profiles/${enc(profile)}`)
      if (state.loadingProfile !== profile) return false
      state.doc = normalizeDoc(data, profile)
      reconcileStaged(state.doc)
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

  function normalizeDoc(data, profile) {
    const doc = data && typeof data === "object" ? data : {}
    const environments = Array.isArray(doc.environments) ? doc.environments : []
    return {
      profile: typeof doc.profile === "string" ? doc.profile : profile,
      created_at: doc.created_at ?? null,
      environments: environments.map((e) => ({
        name: String(e.name),
        services: (Array.isArray(e.services) ? e.services : []).map((s) => ({
          uuid: String(s.uuid),
          name: typeof s.name === "string" ? s.name : "",
          auth_type: s.auth_type,
          handler: s.handler,
          credentials: (Array.isArray(s.credentials) ? s.credentials : []).map((c) => ({
            client_id: String(c.client_id),
            created_at: c.created_at ?? null,
            last_used_at: c.last_used_at ?? null
          }))
        }))
      }))
    }
  }

  function renderEditorLoading(profile) {
    main().replaceChildren(
      breadcrumb(),
      h("div", { class: "page-head" }, h("h1", { id: "page-title", tabindex: "-1" }, profile)),
      h("p", { class: "muted" }, "Loading profile…")
    )
  }

  function renderEditorMissing(profile) {
    main().replaceChildren(
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

  const FORM_IDS = ["new-env-name", "new-svc-name", "new-svc-auth"]
  const serviceLabel = (service) => (service.name ? service.name : `Unnamed service ${service.uuid.slice(0, 8)}`)

  function renderEditor() {
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
          )
        ),
        h(
          "button",
          { type: "button", class: "btn btn-quiet", "data-focus": "refresh", onclick: refreshProfile },
          "Refresh"
        )
      ),
      state.secrets.length > 0 ? secretsPanel() : null,
      envCount === 0
        ? h("p", { class: "empty card" }, "This profile has no environments yet. Add one below, then add services to it.")
        : doc.environments.map(environmentSection),
      addForms(doc),
      saveBar()
    ]
    // Keep what was typed into the add forms, and the focus, across a re-render.
    const kept = {}
    for (const id of FORM_IDS) {
      const el = document.getElementById(id)
      if (el) kept[id] = el.value
    }
    const active = document.activeElement
    const activeId = active && active !== document.body ? active.id : ""
    const activeKey = active && active.dataset ? active.dataset.focus : undefined
    main().replaceChildren(...content.flat().filter(Boolean))
    for (const [id, value] of Object.entries(kept)) {
      const el = document.getElementById(id)
      if (!el) continue
      if (el.tagName === "SELECT" && !Array.from(el.options).some((o) => o.value === value)) continue
      el.value = value
    }
    if (activeId && document.getElementById(activeId)) document.getElementById(activeId).focus()
    else if (activeKey) focusKey(activeKey)
    updateTitle()
  }

  function environmentSection(env) {
    const titleId = nextId("env-title")
    return h(
      "section",
      { class: "environment", "aria-labelledby": titleId },
      h(
        "h2",
        { id: titleId, class: "env-title" },
        h("span", { class: "kicker" }, "Environment "),
        h("span", { class: "env-name" }, env.name)
      ),
      env.services.length === 0
        ? h("p", { class: "empty card" }, "No services in this environment yet.")
        : env.services.map((s) => serviceSection(env.name, s))
    )
  }

  function handlerText(handler) {
    if (!handler || typeof handler !== "object") return "Echo"
    if (handler.type === "echo") return "Echo (answers with the request)"
    if (handler.type === "proxy") return `Proxy to ${handler.url}`
    return String(handler.type)
  }

  function serviceSection(envName, service) {
    const titleId = nextId("svc-title")
    const limitId = nextId("svc-limit")
    const staged = stagedFor(envName, service.uuid)
    const count = projectedCount(envName, service)
    const atLimit = count >= MAX_CREDENTIALS
    const name = serviceLabel(service)
    const pending = staged.adds.length + staged.removes.length > 0

    const rows = []
    for (const cred of service.credentials) rows.push(credentialRow(envName, service, cred))
    staged.adds.forEach((add, i) => rows.push(pendingAddRow(add, i, staged.adds.length)))
    if (rows.length === 0) {
      rows.push(
        h("tr", { class: "empty-row" }, h("td", { colspan: "4" }, "No credentials yet. Add one to let callers get tokens."))
      )
    }

    const authText = AUTH_LABELS[service.auth_type] || String(service.auth_type)
    const limitText = atLimit
      ? `Limit reached: a service holds at most ${MAX_CREDENTIALS} credentials. Remove one to add another.`
      : `${count} of ${MAX_CREDENTIALS} credentials${pending ? " after saving" : ""}.` +
        (service.auth_type !== "oauth" ? " Adding a credential switches this service to OAuth 2.0." : "")

    return h(
      "section",
      {
        class: `service card${pending ? " has-pending" : ""}`,
        "aria-labelledby": titleId,
        "data-service": service.uuid
      },
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
        h("div", null, h("dt", null, "Handler"), h("dd", null, handlerText(service.handler)))
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
              h("th", { scope: "col" }, "Last used"),
              h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions"))
            )
          ),
          h("tbody", null, rows)
        )
      ),
      h(
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
            onclick: () => stageAdd(envName, service)
          },
          h("span", { "aria-hidden": "true", class: "plus" }, "+ "),
          "Add credential"
        ),
        h("p", { class: `hint${atLimit ? " hint-limit" : ""}`, id: limitId }, limitText)
      )
    )
  }

  function credentialRow(envName, service, cred) {
    const removing = isStagedRemoval(envName, service.uuid, cred.client_id)
    const focusKeyName = `cred:${envName}:${service.uuid}:${cred.client_id}`
    const action = removing
      ? h(
          "button",
          {
            type: "button",
            class: "btn btn-small",
            "aria-label": `Undo removal of ${cred.client_id}`,
            "data-focus": focusKeyName,
            onclick: () => unstageRemove(envName, service, cred)
          },
          "Undo"
        )
      : h(
          "button",
          {
            type: "button",
            class: "btn btn-small btn-danger-outline",
            "aria-label": `Remove ${cred.client_id}`,
            "data-focus": focusKeyName,
            onclick: (e) => askRemove(envName, service, cred, e.currentTarget)
          },
          "Remove"
        )
    return h(
      "tr",
      { class: removing ? "pending-removal" : null },
      h(
        "td",
        { "data-label": "Client ID" },
        h("code", { class: "mono client-id" }, cred.client_id),
        removing ? h("span", { class: "badge badge-danger" }, "pending removal") : null
      ),
      h("td", { "data-label": "Created" }, timeEl(cred.created_at)),
      h("td", { "data-label": "Last used" }, timeEl(cred.last_used_at)),
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
        h("span", { class: "badge badge-pending" }, "Pending: new credential"),
        h("span", { class: "muted small block" }, "Client ID and secret are generated when you save.")
      ),
      h("td", { "data-label": "Created" }, h("span", { class: "muted" }, "on save")),
      h("td", { "data-label": "Last used" }, h("span", { class: "muted" }, "—")),
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
            onclick: () => unstageAdd(add)
          },
          "Undo"
        )
      )
    )
  }

  function stageAdd(envName, service) {
    clearMessages()
    if (projectedCount(envName, service) >= MAX_CREDENTIALS) {
      showAlert(`A service holds at most ${MAX_CREDENTIALS} credentials. Remove one before adding another.`)
      return
    }
    const add = { key: `a${++addSeq}`, environment: envName, service_uuid: service.uuid }
    state.staged.adds.push(add)
    renderEditor()
    focusKey(`add:${envName}:${service.uuid}`, `pending:${add.key}`)
    announce(`New credential for ${serviceLabel(service)} staged. Save the profile to create it.`)
  }

  function unstageAdd(add) {
    clearMessages()
    state.staged.adds = state.staged.adds.filter((a) => a !== add)
    renderEditor()
    focusKey(`add:${add.environment}:${add.service_uuid}`, `svc:${add.environment}:${add.service_uuid}`)
    announce("Staged credential discarded.")
  }

  function askRemove(envName, service, cred, button) {
    clearMessages()
    openDialog({
      title: "Remove this credential?",
      body: [
        h("p", null, "Client ID ", h("code", { class: "mono" }, cred.client_id), " of ", h("strong", null, serviceLabel(service)), ` in environment ${envName}.`),
        h(
          "p",
          null,
          "The removal is staged: it takes effect when you save the profile. From then on this credential is refused and every token issued with it stops working."
        ),
        cred.last_used_at
          ? h("p", { class: "muted" }, "Last used ", timeEl(cred.last_used_at), ". Make sure callers have moved to the new credential.")
          : h("p", { class: "muted" }, "This credential has never been used.")
      ],
      confirmLabel: "Remove credential",
      returnFocus: button,
      onConfirm: () => {
        if (!isStagedRemoval(envName, service.uuid, cred.client_id)) {
          state.staged.removes.push({ environment: envName, service_uuid: service.uuid, client_id: cred.client_id })
        }
        renderEditor()
        focusKey(`cred:${envName}:${service.uuid}:${cred.client_id}`)
        announce(`Removal of ${cred.client_id} staged. Save the profile to apply it.`)
      }
    })
  }

  function unstageRemove(envName, service, cred) {
    clearMessages()
    state.staged.removes = state.staged.removes.filter(
      (r) => !(sameService(r, envName, service.uuid) && r.client_id === cred.client_id)
    )
    renderEditor()
    focusKey(`cred:${envName}:${service.uuid}:${cred.client_id}`)
    announce(`Removal of ${cred.client_id} undone.`)
  }

  function discardChanges() {
    if (!isDirty()) return
    if (!window.confirm("Discard all unsaved changes to this profile?")) return
    clearMessages()
    resetStaged(state.doc ? state.doc.profile : null)
    renderEditor()
    focusKey("summary")
    announce("Unsaved changes discarded.")
  }

  function saveBar() {
    const adds = state.staged.adds.length
    const removes = state.staged.removes.length
    const total = adds + removes
    const parts = []
    if (adds) parts.push(plural(adds, "new credential", "new credentials"))
    if (removes) parts.push(plural(removes, "removal", "removals"))
    const summary = total === 0 ? "No unsaved changes." : `${plural(total, "unsaved change", "unsaved changes")}: ${parts.join(", ")}.`
    return h(
      "div",
      { class: `savebar${total ? " dirty" : ""}` },
      h(
        "div",
        { class: "savebar-inner" },
        h("p", { class: "savebar-summary", tabindex: "-1", "data-focus": "summary", id: "pending-summary" }, summary),
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

  async function saveProfile() {
    if (state.saving || !isDirty() || !state.doc) return
    clearMessages()
    const profile = state.doc.profile
    const changes = [
      ...state.staged.removes.map((r) => ({
        op: "remove_credential",
        environment: r.environment,
        service_uuid: r.service_uuid,
        client_id: r.client_id
      })),
      ...state.staged.adds.map((a) => ({ op: "add_credential", environment: a.environment, service_uuid: a.service_uuid }))
    ]
    const names = new Map()
    for (const e of state.doc.environments) for (const s of e.services) names.set(`${e.name}\n${s.uuid}`, serviceLabel(s))
    state.saving = true
    renderEditor()
    let result
    try {
      result = (await api("POST", `/admin/profiles/${enc(profile)}/save`, { changes })).data || {}
    } catch (err) {
      state.saving = false
      renderEditor()
      focusKey("save", "summary")
      fail(err, "The profile was not saved.", "Nothing was changed on the server; your staged changes are still here.")
      return
    }
    state.saving = false
    resetStaged(profile)
    const created = Array.isArray(result.created) ? result.created : []
    const removed = Array.isArray(result.removed) ? result.removed : []
    for (const c of created) {
      state.secrets.push({
        key: nextId("secret"),
        profile,
        environment: String(c.environment),
        service_uuid: String(c.service_uuid),
        service_name: names.get(`${c.environment}\n${c.service_uuid}`) || String(c.service_uuid),
        client_id: String(c.client_id),
        client_secret: String(c.client_secret),
        created_at: c.created_at ?? null
      })
    }
    await loadProfile(profile)
    renderEditor()
    const parts = []
    if (created.length) parts.push(`${plural(created.length, "credential", "credentials")} created`)
    if (removed.length) parts.push(`${plural(removed.length, "credential", "credentials")} removed`)
    announce(`Profile saved${parts.length ? `: ${parts.join(", ")}` : ""}.${created.length ? " Copy the new secret now." : ""}`)
    if (created.length) focusEl(document.getElementById("secrets-title"))
    else focusKey("summary")
  }

  async function refreshProfile() {
    if (!state.doc) return
    clearMessages()
    const ok = await loadProfile(state.doc.profile)
    if (!ok) return
    renderEditor()
    focusKey("refresh")
    announce("Profile refreshed.")
  }

  // Forms to add environments and services

  function addForms(doc) {
    const envInputId = "new-env-name"
    const envHintId = "new-env-hint"
    const envInput = identifierField(envInputId, "environment", envHintId)
    const envButton = h("button", { type: "submit", class: "btn" }, "Add environment")
    const envForm = h(
      "form",
      { class: "stack", "aria-labelledby": "new-env-title", onsubmit: (e) => createEnvironment(e, envInput, envButton) },
      h("h3", { id: "new-env-title" }, "New environment"),
      h("div", { class: "field" }, h("label", { for: envInputId }, "Environment name"), envInput, h("p", { class: "hint", id: envHintId }, NAME_HINT)),
      h("div", { class: "actions" }, envButton)
    )

    const hasEnvs = doc.environments.length > 0
    const envSelect = h(
      "select",
      {
        id: "new-svc-env",
        name: "environment",
        required: true,
        disabled: !hasEnvs,
        onchange: (e) => {
          lastEnvironment = e.currentTarget.value
        }
      },
      doc.environments.map((e) => h("option", { value: e.name }, e.name))
    )
    if (lastEnvironment && doc.environments.some((e) => e.name === lastEnvironment)) envSelect.value = lastEnvironment
    const nameInput = h("input", {
      id: "new-svc-name",
      name: "name",
      type: "text",
      required: true,
      maxlength: "200",
      autocomplete: "off",
      disabled: !hasEnvs
    })
    const authSelect = h(
      "select",
      { id: "new-svc-auth", name: "auth_type", disabled: !hasEnvs },
      h("option", { value: "none" }, AUTH_LABELS.none),
      h("option", { value: "oauth" }, AUTH_LABELS.oauth)
    )
    const svcButton = h("button", { type: "submit", class: "btn", disabled: !hasEnvs }, "Add service")
    const svcForm = h(
      "form",
      {
        class: "stack",
        "aria-labelledby": "new-svc-title",
        onsubmit: (e) => createService(e, envSelect, nameInput, authSelect, svcButton)
      },
      h("h3", { id: "new-svc-title" }, "New service"),
      hasEnvs ? null : h("p", { class: "hint" }, "Add an environment first."),
      h("div", { class: "field" }, h("label", { for: "new-svc-env" }, "Environment"), envSelect),
      h("div", { class: "field" }, h("label", { for: "new-svc-name" }, "Service name"), nameInput),
      h("div", { class: "field" }, h("label", { for: "new-svc-auth" }, "Authentication"), authSelect),
      h("div", { class: "actions" }, svcButton)
    )

    return h(
      "section",
      { class: "card add-forms", "aria-labelledby": "add-title" },
      h("h2", { id: "add-title" }, "Add to this profile"),
      h("div", { class: "two-col" }, envForm, svcForm)
    )
  }

  async function createEnvironment(event, input, button) {
    event.preventDefault()
    clearMessages()
    const name = input.value.trim()
    input.value = name
    if (!input.reportValidity() || !state.doc) return
    const profile = state.doc.profile
    button.disabled = true
    try {
      const { status } = await api("PUT", `/admin/profiles/${enc(profile)}/environments/${enc(name)}`, {})
      lastEnvironment = name
      input.value = ""
      if (await loadProfile(profile)) renderEditor()
      announce(status === 201 ? `Environment ${name} created.` : `Environment ${name} already exists.`)
      focusEl(document.getElementById("new-env-name"))
    } catch (err) {
      button.disabled = false
      fail(err, `Could not create environment ${name}.`)
    }
  }

  async function createService(event, envSelect, nameInput, authSelect, button) {
    event.preventDefault()
    clearMessages()
    const name = nameInput.value.trim()
    nameInput.value = name
    if (!nameInput.reportValidity() || !envSelect.reportValidity() || !state.doc) return
    const profile = state.doc.profile
    const env = envSelect.value
    button.disabled = true
    try {
      const { data } = await api("POST", `/admin/profiles/${enc(profile)}/environments/${enc(env)}/services`, {
        name,
        auth_type: authSelect.value
      })
      lastEnvironment = env
      nameInput.value = ""
      if (await loadProfile(profile)) renderEditor()
      announce(`Service ${name} created in ${env}.`)
      if (!(data && focusKey(`svc:${env}:${data.uuid}`))) focusEl(document.getElementById("new-svc-name"))
    } catch (err) {
      button.disabled = false
      fail(err, `Could not create service ${name}.`)
    }
  }

  // ---------------------------------------------------------------------------------------------
  // New secrets: memory only, shown once

  function secretsPanel() {
    const many = state.secrets.length > 1
    return h(
      "section",
      { class: "secrets", "aria-labelledby": "secrets-title" },
      h(
        "h2",
        { id: "secrets-title", tabindex: "-1" },
        many ? "New credentials: copy the secrets now" : "New credential: copy the secret now"
      ),
      h(
        "p",
        null,
        "The server keeps only a hash of each secret. Reloading or leaving this page hides it for good; if it is lost, add another credential."
      ),
      state.secrets.map(secretCard),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "btn", onclick: dismissSecrets }, "Dismiss"),
        h("span", { class: "hint" }, "Dismiss once the secret is stored safely.")
      )
    )
  }

  function secretCard(secret) {
    const idInput = `${secret.key}-id`
    const secretInput = `${secret.key}-secret`
    const warnId = `${secret.key}-warn`
    const titleId = `${secret.key}-title`
    const secretField = h("input", {
      id: secretInput,
      type: "text",
      readonly: true,
      class: "mono",
      spellcheck: "false",
      autocomplete: "off",
      "aria-describedby": warnId,
      value: secret.client_secret,
      onfocus: (e) => e.currentTarget.select()
    })
    return h(
      "div",
      { class: "secret-card", role: "group", "aria-labelledby": titleId },
      h(
        "h3",
        { id: titleId },
        secret.service_name,
        h("span", { class: "muted small" }, ` · ${secret.profile} / ${secret.environment}`)
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: idInput }, "Client ID"),
        h("input", {
          id: idInput,
          type: "text",
          readonly: true,
          class: "mono",
          spellcheck: "false",
          autocomplete: "off",
          value: secret.client_id,
          onfocus: (e) => e.currentTarget.select()
        })
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: secretInput }, "Client secret"),
        h(
          "div",
          { class: "copy-row" },
          secretField,
          h(
            "button",
            { type: "button", class: "btn btn-primary", onclick: () => copySecret(secretField) },
            "Copy"
          )
        )
      ),
      h("p", { class: "warning", id: warnId }, h("span", { "aria-hidden": "true" }, "⚠ "), "This secret will not be shown again.")
    )
  }

  async function copySecret(input) {
    const value = input.value
    const timeout = new Promise((_, reject) => window.setTimeout(() => reject(new Error("timeout")), 2000))
    try {
      if (!navigator.clipboard || !window.isSecureContext) throw new Error("no clipboard")
      await Promise.race([navigator.clipboard.writeText(value), timeout])
      announce("Secret copied to the clipboard.")
    } catch {
      input.focus()
      input.select()
      let copied = false
      try {
        copied = document.execCommand("copy")
      } catch {
        copied = false
      }
      announce(
        copied
          ? "Secret copied to the clipboard."
          : "Copying is not available here. The secret is selected: press Ctrl+C (⌘C on a Mac) to copy it."
      )
    }
  }

  function wipeSecrets() {
    for (const s of state.secrets) s.client_secret = ""
    state.secrets = []
  }

  function dismissSecrets() {
    wipeSecrets()
    clearMessages()
    const panel = document.querySelector(".secrets")
    if (panel) panel.remove()
    focusEl(document.getElementById("page-title"))
    announce("The secret is no longer shown.")
  }

  // ---------------------------------------------------------------------------------------------
  // Confirmation dialog (modal, focus trapped, Escape cancels, focus returns)

  let openDialogState = null

  function openDialog({ title, body, confirmLabel, onConfirm, returnFocus }) {
    closeDialog(false, true)
    const titleId = nextId("dialog-title")
    const descId = nextId("dialog-desc")
    const cancel = h("button", { type: "button", class: "btn" }, "Cancel")
    const confirm = h("button", { type: "button", class: "btn btn-danger" }, confirmLabel)
    const dialog = h(
      "div",
      {
        class: "dialog",
        role: "dialog",
        "aria-modal": "true",
        "aria-labelledby": titleId,
        "aria-describedby": descId
      },
      h("h2", { id: titleId }, title),
      h("div", { id: descId, class: "dialog-body" }, body),
      h("div", { class: "dialog-actions" }, cancel, confirm)
    )
    const backdrop = h("div", { class: "backdrop" }, dialog)
    const background = Array.from(document.body.children).filter((el) => el.id !== "dialog-root" && el.id !== "messages")
    for (const el of background) el.inert = true
    document.body.classList.add("dialog-open")

    const onKey = (e) => {
      if (e.key === "Escape") {
        e.preventDefault()
        e.stopPropagation()
        closeDialog(false)
      } else if (e.key === "Tab") {
        const focusables = Array.from(dialog.querySelectorAll("button, [href], input, select, textarea, [tabindex]:not([tabindex='-1'])")).filter(
          (el) => !el.disabled
        )
        if (focusables.length === 0) return
        const first = focusables[0]
        const last = focusables[focusables.length - 1]
        if (e.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
          e.preventDefault()
          last.focus()
        } else if (!e.shiftKey && (document.activeElement === last || !dialog.contains(document.activeElement))) {
          e.preventDefault()
          first.focus()
        }
      }
    }
    const onFocusIn = (e) => {
      if (!dialog.contains(e.target)) cancel.focus()
    }
    document.addEventListener("keydown", onKey, true)
    document.addEventListener("focusin", onFocusIn)
    backdrop.addEventListener("mousedown", (e) => {
      if (e.target === backdrop) closeDialog(false)
    })
    cancel.addEventListener("click", () => closeDialog(false))
    confirm.addEventListener("click", () => closeDialog(true))

    openDialogState = { backdrop, background, onKey, onFocusIn, onConfirm, returnFocus }
    document.getElementById("dialog-root").appendChild(backdrop)
    cancel.focus()
  }

  function closeDialog(confirmed, silent) {
    const d = openDialogState
    if (!d) return
    openDialogState = null
    document.removeEventListener("keydown", d.onKey, true)
    document.removeEventListener("focusin", d.onFocusIn)
    d.backdrop.remove()
    for (const el of d.background) el.inert = false
    document.body.classList.remove("dialog-open")
    if (silent) return
    if (confirmed) d.onConfirm()
    else if (d.returnFocus && d.returnFocus.isConnected) d.returnFocus.focus()
  }

  // ---------------------------------------------------------------------------------------------
  // Start

  window.addEventListener("hashchange", onHashChange)
  window.addEventListener("beforeunload", (e) => {
    if (isDirty()) {
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
})()
