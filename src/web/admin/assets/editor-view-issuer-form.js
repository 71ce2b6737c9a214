/*
 * The form that registers a trusted issuer (`POST /admin/trusted-issuers`) or changes one whole
 * (`PUT /admin/trusted-issuers/{name}`): its URL, its keys (fetched through discovery, or a JWKS
 * pasted), audience, algorithms, longest token lifetime, profiles, and plain http: on loopback.
 * Applied at once; the body is made by `issuerBody` (editor-issuers.js).
 */
import { api } from "./editor-api.js"
import { clearMessages, h, showAlert } from "./editor-dom.js"
import { issuerBody } from "./editor-issuers.js"
import { fail } from "./editor-router.js"
import { enc } from "./editor-state.js"
import {
  DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
  FEDERATION_ALGORITHMS,
  MAX_TOKEN_LIFETIME_LIMIT_SECONDS,
  TRUSTED_ISSUER_NAME_INPUT_PATTERN
} from "./Limits.js"

/** What each algorithm is, beside its checkbox. */
const ALGORITHM_LABELS = { RS256: "RS256 (RSA)", ES256: "ES256 (EC P-256)", EdDSA: "EdDSA (Ed25519)" }

/** A field with its label and hint. */
const field = (id, label, control, hint) =>
  h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null)

/**
 * The form: empty for a new issuer, or filled with `issuer` to change it (its name fixed).
 * `onDone(name, created)` after the server took it; `onCancel` when a change is abandoned.
 */
export function issuerForm(issuer, { onDone, onCancel }) {
  const changing = issuer !== null
  const input = (id, props) => h("input", { id, autocomplete: "off", spellcheck: "false", "aria-describedby": `${id}-hint`, ...props })
  const name = input("issuer-name", {
    type: "text",
    required: true,
    pattern: TRUSTED_ISSUER_NAME_INPUT_PATTERN,
    readonly: changing,
    value: changing ? issuer.name : ""
  })
  const url = input("issuer-url", {
    type: "url",
    required: true,
    maxlength: "2048",
    placeholder: "https://oidc.example.com",
    value: changing ? issuer.issuer : ""
  })
  const inline = changing && issuer.jwks !== undefined
  const keysDiscovery = h("input", { id: "issuer-keys-discovery", type: "radio", name: "issuer-keys", value: "discovery" })
  const keysInline = h("input", { id: "issuer-keys-inline", type: "radio", name: "issuer-keys", value: "inline" })
  keysDiscovery.checked = !inline
  keysInline.checked = inline
  const jwks = h("textarea", {
    id: "issuer-jwks",
    rows: "6",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "{\"keys\": [{\"kty\": \"RSA\", \"kid\": \"…\", \"n\": \"…\", \"e\": \"AQAB\"}]}",
    "aria-describedby": "issuer-jwks-hint",
    value: inline ? JSON.stringify(issuer.jwks, null, 2) : ""
  })
  const jwksField = field(
    "issuer-jwks",
    "JWKS (public keys)",
    jwks,
    "The issuer's key set as JSON, e.g. the output of kubectl get --raw /openid/v1/jwks; public keys only (RSA, EC P-256, Ed25519)."
  )
  const showKeys = () => (jwksField.hidden = !keysInline.checked)
  keysDiscovery.addEventListener("change", showKeys)
  keysInline.addEventListener("change", showKeys)
  showKeys()
  const audience = input("issuer-audience", {
    type: "text",
    maxlength: "2048",
    placeholder: "this server's issuer identifier",
    value: changing ? issuer.audience : ""
  })
  const algorithms = FEDERATION_ALGORITHMS.map((alg) => {
    const box = h("input", { id: `issuer-alg-${alg}`, type: "checkbox", value: alg })
    box.checked = !changing || issuer.algorithms.includes(alg)
    return box
  })
  const lifetime = input("issuer-lifetime", {
    type: "number",
    min: "1",
    max: String(MAX_TOKEN_LIFETIME_LIMIT_SECONDS),
    step: "1",
    placeholder: String(DEFAULT_MAX_TOKEN_LIFETIME_SECONDS),
    value: changing ? String(issuer.max_token_lifetime_seconds) : ""
  })
  const profiles = input("issuer-profiles", { type: "text", value: changing ? issuer.profiles.join(", ") : "" })
  const loopback = h("input", { id: "issuer-loopback", type: "checkbox", "aria-describedby": "issuer-loopback-hint" })
  loopback.checked = changing && issuer.allow_insecure_loopback === true
  const submit = h("button", { type: "submit", class: "btn btn-primary" }, changing ? "Save issuer" : "Register issuer")
  const controls = { name, url, keysInline, jwks, audience, algorithms, lifetime, profiles, loopback, submit }

  return h(
    "section",
    { class: "card", "aria-labelledby": "issuer-form-title" },
    h("h2", { id: "issuer-form-title", tabindex: "-1" }, changing ? `Change issuer ${issuer.name}` : "New trusted issuer"),
    h(
      "form",
      { class: "stack issuer-form", onsubmit: (e) => onSubmit(e, changing, controls, onDone) },
      field(
        "issuer-name",
        "Name",
        name,
        changing
          ? "Federated credentials name the issuer so; it cannot be changed."
          : "1-64 letters, digits, '.', '_' or '-': how federated credentials name it."
      ),
      field("issuer-url", "Issuer URL", url, "Its tokens' iss, exactly. https:, or http: on a loopback host with the last box ticked."),
      h(
        "fieldset",
        { class: "choices" },
        h("legend", null, "Keys"),
        h("label", { class: "check" }, keysDiscovery, " Fetch them through the issuer's discovery document"),
        h("label", { class: "check" }, keysInline, " Paste them (an issuer this server cannot reach)")
      ),
      jwksField,
      field("issuer-audience", "Audience", audience, "One of the tokens' aud must be it. Empty: this server's issuer identifier."),
      h(
        "fieldset",
        { class: "choices choices-row" },
        h("legend", null, "Algorithms accepted"),
        algorithms.map((box) => h("label", { class: "check" }, box, ` ${ALGORITHM_LABELS[box.value] ?? box.value}`))
      ),
      field(
        "issuer-lifetime",
        "Longest token lifetime (seconds)",
        lifetime,
        `exp - iat of a token, 1 to ${MAX_TOKEN_LIFETIME_LIMIT_SECONDS}. Empty: ${DEFAULT_MAX_TOKEN_LIFETIME_SECONDS}.`
      ),
      field(
        "issuer-profiles",
        "Profiles",
        profiles,
        "The profiles whose services may have its federated credentials, separated by commas."
      ),
      h(
        "div",
        { class: "field" },
        h("label", { class: "check" }, loopback, " Allow plain http: on a loopback host"),
        h(
          "p",
          { class: "hint", id: "issuer-loopback-hint" },
          "For a test issuer or a sidecar on the same host (127.0.0.1, ::1, localhost) only."
        )
      ),
      h(
        "div",
        { class: "actions" },
        submit,
        changing ? h("button", { type: "button", class: "btn btn-quiet", onclick: onCancel }, "Cancel") : null
      )
    )
  )
}

async function onSubmit(event, changing, c, onDone) {
  event.preventDefault()
  clearMessages()
  c.name.value = c.name.value.trim()
  if (!c.name.reportValidity()) return
  const made = issuerBody({
    issuer: c.url.value,
    keys: c.keysInline.checked ? "inline" : "discovery",
    jwks: c.jwks.value,
    audience: c.audience.value,
    algorithms: c.algorithms.filter((box) => box.checked).map((box) => box.value),
    maxLifetime: c.lifetime.value,
    profiles: c.profiles.value,
    allowInsecureLoopback: c.loopback.checked
  })
  if (made.error !== undefined) {
    showAlert(made.error)
    const at = { issuer: c.url, jwks: c.jwks, algorithms: c.algorithms[0], maxLifetime: c.lifetime, profiles: c.profiles }[made.field]
    if (at) at.focus()
    return
  }
  const name = c.name.value
  c.submit.disabled = true
  try {
    const { status } = changing
      ? await api("PUT", `/admin/trusted-issuers/${enc(name)}`, made.body)
      : await api("POST", "/admin/trusted-issuers", { name, ...made.body })
    await onDone(name, status === 201)
  } catch (err) {
    c.submit.disabled = false
    fail(err, changing ? `Could not change trusted issuer ${name}.` : `Could not register trusted issuer ${name}.`)
  }
}
