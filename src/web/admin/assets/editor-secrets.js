/*
 * New client secrets: in memory only (`state.secrets`), shown once in a panel until dismissed.
 */
import { announce, clearMessages, copyField, focusEl, h, nextId } from "./editor-dom.js"
import { state } from "./editor-state.js"

/**
 * Keeps the secrets of a save's `created` items (a key credential has none); `names` maps
 * "env\nuuid" to a service's label. Answers how many it kept.
 */
export function keepSecrets(profile, created, names) {
  const withSecrets = created.filter((c) => typeof c.client_secret === "string")
  for (const c of withSecrets) {
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
  return withSecrets.length
}

export function wipeSecrets() {
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

/** The panel, or null when there is no secret to show. */
export function secretsPanel() {
  if (state.secrets.length === 0) return null
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
  const warnId = `${secret.key}-warn`
  const titleId = `${secret.key}-title`
  return h(
    "div",
    { class: "secret-card", role: "group", "aria-labelledby": titleId },
    h("h3", { id: titleId }, secret.service_name, h("span", { class: "muted small" }, ` · ${secret.profile} / ${secret.environment}`)),
    copyField(`${secret.key}-id`, "Client ID", secret.client_id, "Client ID", "Copy client ID"),
    copyField(`${secret.key}-secret`, "Client secret", secret.client_secret, "Secret", "Copy", { "aria-describedby": warnId }, true),
    h("p", { class: "warning", id: warnId }, h("span", { "aria-hidden": "true" }, "⚠ "), "This secret will not be shown again.")
  )
}
