/*
 * What the page knows, shared by the views, and its address (the hash route).
 *
 * - The admin token lives in sessionStorage only and travels only as `Authorization: Bearer`.
 * - New client secrets live only in `state.secrets` in memory: never in storage, the URL or the DOM
 *   after the panel is dismissed, so a reload shows them no more.
 */
import { emptyChanges, isDirty } from "./editor-changes.js"

const TOKEN_KEY = "service-auth.admin-token"

function readToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY)
  } catch {
    return null
  }
}

/** Everything the page knows. Secrets are here and nowhere else. */
export const state = {
  token: readToken(),
  /** What the token is (`GET /admin/session`): `{ name, role, profiles }`; null until asked. */
  session: null,
  profiles: null,
  doc: null,
  loadingProfile: null,
  staged: emptyChanges(null),
  secrets: [],
  saving: false,
  /** The profile's recent history: `{ profile, events, next, error }`. */
  history: null,
  /** The environment last used in the add forms, preselected in the "New service" form. */
  lastEnvironment: null,
  /** The trusted issuers, for an admin token (`GET /admin/trusted-issuers`); null when not known. */
  issuers: null,
  /** The issuers the open profile may use (`GET …/{profile}/trusted-issuers`): `{ profile, issuers }`; null when not known. */
  profileIssuers: null
}

export function writeToken(token) {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY)
    else sessionStorage.setItem(TOKEN_KEY, token)
  } catch {
    /* storage unavailable: the token then lives for this page only */
  }
  state.token = token
}

export const dirty = () => isDirty(state.staged)

/**
 * What the page offers follows the token's role (the server decides; the page only hides what it
 * would refuse): a viewer (or an introspector, which reads nothing either) sees no change control, only an admin creates or deletes profiles and
 * manages admin tokens.
 */
export const mayChange = () => !!state.session && (state.session.role === "admin" || state.session.role === "owner")
export const isAdmin = () => !!state.session && state.session.role === "admin"

export function resetStaged(profile) {
  state.staged = emptyChanges(profile ?? null)
}

export const enc = encodeURIComponent
export const profileHash = (profile) => `#/profiles/${enc(profile)}`
export const profilePath = (profile) => `/admin/profiles/${enc(profile)}`

export function parseRoute(hash) {
  const path = (hash || "").replace(/^#/, "")
  if (path === "" || path === "/" || path === "/profiles" || path === "/profiles/") return { name: "profiles" }
  if (path === "/tokens" || path === "/tokens/") return { name: "tokens" }
  if (path === "/issuers" || path === "/issuers/") return { name: "issuers" }
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

export function updateTitle() {
  const route = parseRoute(location.hash)
  const base = "Profile editor · service-auth"
  let title = base
  if (!state.token) title = `Sign in · ${base}`
  else if (route.name === "editor") title = `${route.profile} · ${base}`
  else if (route.name === "profiles") title = `Profiles · ${base}`
  else if (route.name === "tokens") title = `Admin tokens · ${base}`
  else if (route.name === "issuers") title = `Trusted issuers · ${base}`
  document.title = (dirty() ? "• " : "") + title
}
