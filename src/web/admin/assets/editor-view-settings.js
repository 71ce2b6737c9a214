/*
 * A service's settings in the editor: rename it, set its handler (echo, or proxy to a URL with its
 * timeout and static headers: their values are write-only, typed to replace, never shown) with
 * `PUT …/services/{uuid}`, and delete it. These apply at once; they are not staged changes.
 */
import { api } from "./editor-api.js"
import { headerLines, rateLimitFields, serviceUpdate } from "./editor-changes.js"
import { openDialog } from "./editor-dialog.js"
import { announce, clearMessages, focusEl, focusKey, h } from "./editor-dom.js"
import { fail } from "./editor-router.js"
import { SERVICE_NAME_MAX_LENGTH, UPSTREAM_URL_MAX_LENGTH } from "./Limits.js"
import { enc, profilePath, state } from "./editor-state.js"
import { reloadProfile } from "./editor-view-editor.js"
import { serviceLabel } from "./editor-view-service.js"

const servicePath = (envName, uuid) => `${profilePath(state.doc.profile)}/environments/${enc(envName)}/services/${enc(uuid)}`

/** The "Edit service" disclosure of one service. */
export function serviceSettings(envName, service) {
  const id = (what) => `svc-${what}-${envName}-${service.uuid}`
  const handler = service.handler && typeof service.handler === "object" ? service.handler : { type: "echo" }
  const nameInput = h("input", {
    id: id("name"),
    name: "name",
    type: "text",
    required: true,
    maxlength: String(SERVICE_NAME_MAX_LENGTH),
    autocomplete: "off",
    value: service.name,
    "data-keep": true
  })
  const urlInput = h("input", {
    id: id("url"),
    name: "url",
    type: "url",
    maxlength: String(UPSTREAM_URL_MAX_LENGTH),
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "https://",
    value: handler.type === "proxy" ? String(handler.url ?? "") : "",
    "aria-describedby": id("url-hint"),
    "data-keep": true
  })
  const urlField = h(
    "div",
    { class: "field" },
    h("label", { for: id("url") }, "Proxy URL"),
    urlInput,
    h("p", { class: "hint", id: id("url-hint") }, "An absolute http or https URL; the service forwards each call's JSON body to it.")
  )
  const timeoutInput = h("input", {
    id: id("timeout"),
    name: "timeout_ms",
    type: "number",
    min: "100",
    max: "60000",
    step: "1",
    placeholder: "default",
    value: handler.type === "proxy" && handler.timeout_ms !== undefined ? String(handler.timeout_ms) : "",
    "aria-describedby": id("timeout-hint"),
    "data-keep": true
  })
  const storedNames = handler.type === "proxy" && Array.isArray(handler.headers) ? handler.headers : []
  const headersInput = h("textarea", {
    id: id("headers"),
    name: "headers",
    rows: "3",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "X-Api-Key: value",
    "aria-describedby": id("headers-hint"),
    "data-keep": true
  })
  const clearHeaders = h("input", { id: id("headers-clear"), type: "checkbox", "data-keep": true })
  const proxyFields = h(
    "div",
    { class: "stack" },
    h(
      "div",
      { class: "field" },
      h("label", { for: id("timeout") }, "Timeout (ms)"),
      timeoutInput,
      h("p", { class: "hint", id: id("timeout-hint") }, "100 to 60000; empty: the server's UPSTREAM_TIMEOUT_MS.")
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: id("headers") }, "Static upstream headers"),
      headersInput,
      h(
        "p",
        { class: "hint", id: id("headers-hint") },
        storedNames.length > 0
          ? `Stored: ${
            storedNames.join(", ")
          } (values are never shown). Type lines "Name: value" to replace them all; leave empty to keep them.`
          : `None stored. One "Name: value" per line (up to 10), e.g. an API key the upstream expects; values are never shown again.`
      ),
      storedNames.length > 0
        ? h("label", { class: "check" }, clearHeaders, " Remove the stored headers")
        : null
    )
  )
  const showUrl = (type) => {
    urlField.hidden = type !== "proxy"
    proxyFields.hidden = type !== "proxy"
    urlInput.required = type === "proxy"
  }
  const handlerSelect = h(
    "select",
    { id: id("handler"), name: "handler", "data-keep": true, onchange: (e) => showUrl(e.currentTarget.value) },
    h("option", { value: "echo" }, "Echo (answers with the request)"),
    h("option", { value: "proxy" }, "Proxy to a URL")
  )
  handlerSelect.value = handler.type === "proxy" ? "proxy" : "echo"
  showUrl(handlerSelect.value)
  const limit = service.rate_limit
  const requestsInput = h("input", {
    id: id("rate-requests"),
    name: "rate_requests",
    type: "number",
    min: "1",
    max: "1000000",
    step: "1",
    placeholder: "none",
    value: limit ? String(limit.requests) : "",
    "aria-describedby": id("rate-hint"),
    "data-keep": true,
    oninput: () => clearRateValidity()
  })
  const windowInput = h("input", {
    id: id("rate-window"),
    name: "rate_per_seconds",
    type: "number",
    min: "1",
    max: "3600",
    step: "1",
    placeholder: "none",
    value: limit ? String(limit.per_seconds) : "",
    "aria-describedby": id("rate-hint"),
    "data-keep": true,
    oninput: () => clearRateValidity()
  })
  /** A rate limit's message was about the pair: editing either field clears it from both. */
  function clearRateValidity() {
    requestsInput.setCustomValidity("")
    windowInput.setCustomValidity("")
  }
  const rateFields = h(
    "div",
    { class: "stack" },
    h("div", { class: "field" }, h("label", { for: id("rate-requests") }, "Rate limit: calls per client"), requestsInput),
    h("div", { class: "field" }, h("label", { for: id("rate-window") }, "Rate limit: window (seconds)"), windowInput),
    h(
      "p",
      { class: "hint", id: id("rate-hint") },
      "Each client (a token's client, or an address when the service has no OAuth) may make that many calls per window, " +
        "on each instance; beyond, 429. Both empty: no limit."
    )
  )
  const dpopInput = h("input", {
    id: id("require-dpop"),
    name: "require_dpop",
    type: "checkbox",
    "aria-describedby": id("dpop-hint"),
    "data-keep": true
  })
  dpopInput.checked = service.require_dpop === true
  const dpopField = h(
    "div",
    { class: "field" },
    h("label", { class: "check" }, dpopInput, " Require DPoP-bound tokens"),
    h(
      "p",
      { class: "hint", id: id("dpop-hint") },
      "Tokens for this service are issued only with a DPoP proof (RFC 9449), and Bearer tokens are refused (401)."
    )
  )
  const button = h("button", { type: "submit", class: "btn", "data-focus": `svc-update:${envName}:${service.uuid}` }, "Update service")

  return h(
    "details",
    { class: "service-settings", id: id("settings"), "data-keep": true },
    h("summary", null, "Edit service"),
    h(
      "form",
      {
        class: "stack",
        onsubmit: (e) =>
          updateService(e, envName, service, nameInput, handlerSelect, urlInput, {
            timeoutInput,
            headersInput,
            clearHeaders,
            requestsInput,
            windowInput,
            dpopInput
          }, button)
      },
      h("div", { class: "field" }, h("label", { for: id("name") }, "Name"), nameInput),
      h("div", { class: "field" }, h("label", { for: id("handler") }, "Handler"), handlerSelect),
      urlField,
      proxyFields,
      rateFields,
      dpopField,
      h(
        "div",
        { class: "actions settings-actions" },
        button,
        h(
          "button",
          {
            type: "button",
            class: "btn btn-danger-outline",
            "data-focus": `svc-delete:${envName}:${service.uuid}`,
            onclick: (e) => askDeleteService(envName, service, e.currentTarget)
          },
          "Delete service"
        )
      )
    )
  )
}

async function updateService(event, envName, service, nameInput, handlerSelect, urlInput, proxy, button) {
  event.preventDefault()
  clearMessages()
  nameInput.value = nameInput.value.trim()
  urlInput.value = urlInput.value.trim()
  const typed = handlerSelect.value === "proxy" ? headerLines(proxy.headersInput.value) : { headers: {} }
  proxy.headersInput.setCustomValidity(typed.error ?? "")
  if (!nameInput.reportValidity() || !urlInput.reportValidity() || !proxy.timeoutInput.reportValidity()) return
  if (!proxy.headersInput.reportValidity() || !state.doc) return
  const rate = rateLimitFields(proxy.requestsInput.value, proxy.windowInput.value)
  // The message goes on the field at fault (the window's on the window), and is cleared as either
  // field is edited (below): a custom validity left set would block every later submit unheard.
  const atFault = rate.error !== undefined && rate.error.startsWith("The window") ? proxy.windowInput : proxy.requestsInput
  proxy.requestsInput.setCustomValidity("")
  proxy.windowInput.setCustomValidity("")
  atFault.setCustomValidity(rate.error ?? "")
  if (!atFault.reportValidity()) return
  const headers = Object.keys(typed.headers).length > 0 ? typed.headers : proxy.clearHeaders.checked ? {} : undefined
  const body = serviceUpdate(
    service,
    nameInput.value,
    handlerSelect.value,
    urlInput.value,
    {
      timeoutMs: proxy.timeoutInput.value,
      ...(headers === undefined ? {} : { headers })
    },
    rate.rateLimit,
    proxy.dpopInput.checked
  )
  button.disabled = true
  try {
    await api("PUT", servicePath(envName, service.uuid), body)
  } catch (err) {
    button.disabled = false
    fail(err, `Could not update service ${serviceLabel(service)}.`)
    return
  }
  // Closed and re-read from the server: the form shows what the server now holds.
  const settings = document.getElementById(`svc-settings-${envName}-${service.uuid}`)
  for (const el of settings ? settings.querySelectorAll("[data-keep]") : []) el.removeAttribute("data-keep")
  if (settings) settings.removeAttribute("data-keep")
  if (await reloadProfile()) focusKey(`svc:${envName}:${service.uuid}`)
  announce(`Service ${body.name} updated.`)
}

function askDeleteService(envName, service, button) {
  clearMessages()
  const n = service.credentials.length
  openDialog({
    title: "Delete this service?",
    body: [
      h("p", null, "Service ", h("strong", null, serviceLabel(service)), ` in environment ${envName}.`),
      h("code", { class: "mono" }, service.uuid),
      h(
        "p",
        null,
        n > 0
          ? `${n === 1 ? "Its credential is" : `Its ${n} credentials are`} deleted with it: every token issued with ${
            n === 1 ? "it" : "them"
          } stops working at once, and calls to the service get 404.`
          : "Calls to the service get 404 from then on."
      ),
      h("p", { class: "muted" }, "This is not a staged change: it happens when you confirm, and cannot be undone.")
    ],
    confirmLabel: "Delete service",
    returnFocus: button,
    onConfirm: async () => {
      try {
        await api("DELETE", servicePath(envName, service.uuid))
      } catch (err) {
        fail(err, `Could not delete service ${serviceLabel(service)}.`)
        return
      }
      if (await reloadProfile()) focusEl(document.getElementById("page-title"))
      announce(`Service ${serviceLabel(service)} deleted.`)
    }
  })
}
