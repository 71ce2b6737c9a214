/*
 * The "Add to this profile" forms: a new environment, a new service.
 */
import { api } from "./editor-api.js"
import { announce, clearMessages, focusEl, focusKey, h, identifierField, NAME_HINT } from "./editor-dom.js"
import { fail } from "./editor-router.js"
import { SERVICE_NAME_MAX_LENGTH } from "./Limits.js"
import { enc, profilePath, state } from "./editor-state.js"
import { reloadProfile } from "./editor-view-editor.js"
import { AUTH_LABELS } from "./editor-view-service.js"

export function addForms(doc) {
  const envInputId = "new-env-name"
  const envHintId = "new-env-hint"
  const envInput = identifierField(envInputId, "environment", envHintId)
  envInput.setAttribute("data-keep", "")
  const envButton = h("button", { type: "submit", class: "btn" }, "Add environment")
  const envForm = h(
    "form",
    { class: "stack", "aria-labelledby": "new-env-title", onsubmit: (e) => createEnvironment(e, envInput, envButton) },
    h("h3", { id: "new-env-title" }, "New environment"),
    h(
      "div",
      { class: "field" },
      h("label", { for: envInputId }, "Environment name"),
      envInput,
      h("p", { class: "hint", id: envHintId }, NAME_HINT)
    ),
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
        state.lastEnvironment = e.currentTarget.value
      }
    },
    doc.environments.map((e) => h("option", { value: e.name }, e.name))
  )
  if (state.lastEnvironment && doc.environments.some((e) => e.name === state.lastEnvironment)) {
    envSelect.value = state.lastEnvironment
  }
  const nameInput = h("input", {
    id: "new-svc-name",
    name: "name",
    type: "text",
    required: true,
    maxlength: String(SERVICE_NAME_MAX_LENGTH),
    autocomplete: "off",
    disabled: !hasEnvs,
    "data-keep": true
  })
  const authSelect = h(
    "select",
    { id: "new-svc-auth", name: "auth_type", disabled: !hasEnvs, "data-keep": true },
    // OAuth first and chosen: an open service should be a decision, not what a hurried click leaves.
    h("option", { value: "oauth", selected: true }, AUTH_LABELS.oauth),
    h("option", { value: "none" }, AUTH_LABELS.none)
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
  button.disabled = true
  try {
    const { status } = await api("PUT", `${profilePath(state.doc.profile)}/environments/${enc(name)}`, {})
    state.lastEnvironment = name
    input.value = ""
    await reloadProfile()
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
  const env = envSelect.value
  button.disabled = true
  try {
    const { data } = await api("POST", `${profilePath(state.doc.profile)}/environments/${enc(env)}/services`, {
      name,
      auth_type: authSelect.value
    })
    state.lastEnvironment = env
    nameInput.value = ""
    await reloadProfile()
    announce(`Service ${name} created in ${env}.`)
    if (!(data && focusKey(`svc:${env}:${data.uuid}`))) focusEl(document.getElementById("new-svc-name"))
  } catch (err) {
    button.disabled = false
    fail(err, `Could not create service ${name}.`)
  }
}
