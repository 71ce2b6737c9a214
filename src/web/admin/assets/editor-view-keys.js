/*
 * Key credentials in the editor: the "Add a public key" form of a service, which stages a new
 * credential without a secret from a pasted JWK or PEM public key (`editor-keys.js`), and how a key
 * credential shows in the credential list (its key type, kid and thumbprint; never a secret).
 */
import { MAX_CREDENTIALS, stageAdd } from "./editor-changes.js"
import { announce, clearMessages, focusKey, h, showAlert } from "./editor-dom.js"
import { KEY_FORMS, pastedPublicKey } from "./editor-keys.js"
import { state } from "./editor-state.js"
import { renderEditor } from "./editor-view-editor.js"

/** The key types' names as the server lists them (`kty`). */
const KEY_TYPES = { RSA: "RSA", EC: "EC P-256", OKP: "Ed25519" }

/** What the list shows under a key credential's client id: its key, and that it has no secret. */
export function publicKeyFacts(publicKey) {
  return h(
    "span",
    { class: "muted small block key-facts" },
    `Public key (${KEY_TYPES[publicKey.kty] ?? publicKey.kty}, no secret) · kid `,
    h("code", { class: "mono" }, publicKey.kid),
    publicKey.kid === publicKey.thumbprint ? null : [" · thumbprint ", h("code", { class: "mono" }, publicKey.thumbprint)]
  )
}

/** The "Add a public key" disclosure of a service: paste, then stage (saved with the profile). */
export function keyAddForm(envName, service, atLimit, label) {
  const id = (what) => `key-${what}-${envName}-${service.uuid}`
  const textarea = h("textarea", {
    id: id("text"),
    name: "public_key",
    rows: "6",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"…\",\"y\":\"…\"}\nor\n-----BEGIN PUBLIC KEY-----\n…\n-----END PUBLIC KEY-----",
    "aria-describedby": id("hint"),
    "data-keep": true,
    oninput: () => whyDisabled()
  })
  const button = h(
    "button",
    {
      type: "submit",
      class: "btn",
      disabled: true,
      "aria-describedby": id("why"),
      "data-focus": `key-stage:${envName}:${service.uuid}`
    },
    "Stage key credential"
  )
  // A disabled button says why beside it: the service is full, or nothing is pasted yet.
  const why = h("p", { class: "hint", id: id("why") })
  const whyDisabled = () => {
    const empty = textarea.value.trim() === ""
    button.disabled = atLimit || empty
    why.textContent = atLimit
      ? `This service holds ${MAX_CREDENTIALS} credentials, the most it may: remove one to add a key.`
      : empty
      ? "Paste a public key above to stage it."
      : ""
    why.hidden = !button.disabled
  }
  whyDisabled()
  const details = h(
    "details",
    { class: "key-add", id: id("add"), "data-keep": true },
    h("summary", null, "Add a public key"),
    h(
      "form",
      { class: "stack", onsubmit: (e) => onStageKey(e, envName, service, textarea, details, label) },
      h(
        "div",
        { class: "field" },
        h("label", { for: id("text") }, "Public key (JWK or PEM)"),
        textarea,
        h(
          "p",
          { class: "hint", id: id("hint") },
          `Paste ${KEY_FORMS}: RSA of at least 2048 bits, EC P-256 or Ed25519. Its client then authenticates with ` +
            "private_key_jwt, signing with the private key, which never leaves it. The credential has no secret."
        )
      ),
      h("div", { class: "actions key-actions" }, button, why)
    )
  )
  return details
}

async function onStageKey(event, envName, service, textarea, details, label) {
  event.preventDefault()
  clearMessages()
  const pasted = await pastedPublicKey(textarea.value)
  if (pasted.error !== undefined) {
    showAlert(pasted.error)
    textarea.focus()
    return
  }
  const key = /** @type {{ publicKey: Record<string, unknown> | string, label: string }} */ (pasted)
  const next = stageAdd(state.staged, envName, service, key)
  if (!next) {
    showAlert(`A service holds at most ${MAX_CREDENTIALS} credentials. Remove one before adding another.`)
    return
  }
  state.staged = next.changes
  // Emptied and closed: the key is staged, shown as a pending row.
  textarea.value = ""
  details.open = false
  renderEditor()
  focusKey(`pending:${next.add.key}`)
  announce(`New key credential (${key.label}) for ${label} staged. Save the profile to create it.`)
}
