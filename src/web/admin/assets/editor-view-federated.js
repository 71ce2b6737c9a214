/*
 * Federated credentials in the editor (workload identity federation): a service's "Add a federated
 * credential" form, and how one shows in the credential list (its trusted issuer, subject and
 * claims; no secret, no key).
 *
 * The profile's `save` has no operation for them, so the form adds one at once with
 * `POST …/federated-credentials`, as the service settings apply at once; removing one is staged and
 * saved as any credential's removal. The issuer is picked among those that allow the profile
 * (`GET /admin/profiles/{profile}/trusted-issuers`, for any token that may change it); should that
 * list not load, its name is typed instead, and the server judges it.
 */
import { api } from "./editor-api.js"
import { announce, clearMessages, focusKey, h, showAlert } from "./editor-dom.js"
import { claimsOf, claimsText } from "./editor-issuers.js"
import { fail } from "./editor-router.js"
import { FEDERATED_CLAIM_TEXT_MAX, FEDERATED_CLAIMS_MAX, MAX_CREDENTIALS, TRUSTED_ISSUER_NAME_INPUT_PATTERN } from "./Limits.js"
import { enc, isAdmin, mayChange, profilePath, state } from "./editor-state.js"
import { reloadProfile } from "./editor-view-editor.js"

/** The claim rows typed into each service's form, by service, so that a re-render keeps them. */
const claimRows = new Map()

/** Loads the issuers the profile's forms offer; on failure the forms take a typed name instead. */
export async function loadProfileIssuers(profile) {
  state.profileIssuers = null
  if (!mayChange()) return
  try {
    const { data } = await api("GET", `${profilePath(profile)}/trusted-issuers`)
    if (data && Array.isArray(data.issuers)) state.profileIssuers = { profile, issuers: data.issuers }
  } catch {
    // The form falls back on a typed name; the server still says which names it refuses.
  }
}

/** What the picked issuer's tokens must carry, for whoever sets up the workload. */
function issuerNeeds(issuer) {
  if (!issuer) return ""
  return `Its tokens must carry aud ${issuer.audience}, be signed with ${issuer.algorithms.join(", ")} and live at most ` +
    `${issuer.max_token_lifetime_seconds} s.`
}

/** What the list shows under a federated credential's client id. */
export function federatedFacts(identity) {
  const claims = claimsText(identity)
  return h(
    "span",
    { class: "muted small block key-facts fed-facts" },
    "Federated (no secret) · issuer ",
    h("code", { class: "mono" }, identity.issuer),
    " · subject ",
    h("code", { class: "mono" }, identity.subject),
    claims === "" ? null : [" · claims ", h("code", { class: "mono" }, claims)]
  )
}

/** The "Add a federated credential" disclosure of a service: applied at once, not staged. */
export function federatedAddForm(envName, service, atLimit, label) {
  const id = (what) => `fed-${what}-${envName}-${service.uuid}`
  const rowsKey = `${envName}\n${service.uuid}`
  const rows = claimRows.get(rowsKey) ?? []
  const profile = state.doc.profile
  const choices = state.profileIssuers !== null && state.profileIssuers.profile === profile ? state.profileIssuers.issuers : null
  const issuer = choices === null
    ? h("input", {
      id: id("issuer"),
      type: "text",
      required: true,
      pattern: TRUSTED_ISSUER_NAME_INPUT_PATTERN,
      autocomplete: "off",
      spellcheck: "false",
      "aria-describedby": id("issuer-hint"),
      "data-keep": true
    })
    : h(
      "select",
      {
        id: id("issuer"),
        required: true,
        disabled: choices.length === 0,
        "aria-describedby": id("issuer-hint"),
        "data-keep": true,
        onchange: (e) => (needs.textContent = issuerNeeds(choices.find((c) => c.name === e.currentTarget.value)))
      },
      choices.map((choice) => h("option", { value: choice.name }, `${choice.name} (${choice.issuer})`))
    )
  const needs = h("span", { class: "block" }, choices === null ? "" : issuerNeeds(choices[0]))
  const issuerHint = choices === null
    ? "The name of a trusted issuer that allows this profile (the list of them could not be loaded)."
    : choices.length === 0
    ? isAdmin()
      ? [
        `No trusted issuer allows profile ${profile} yet. Register one, or add the profile to one, on the `,
        h("a", { href: "#/issuers" }, "Trusted issuers"),
        " page."
      ]
      : `No trusted issuer allows profile ${profile} yet: an admin registers them.`
    : [`The trusted issuers that allow profile ${profile}. `, needs]
  const subject = h("input", {
    id: id("subject"),
    type: "text",
    required: true,
    maxlength: String(FEDERATED_CLAIM_TEXT_MAX),
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "system:serviceaccount:payments:billing",
    "aria-describedby": id("subject-hint"),
    "data-keep": true
  })
  const expires = h("input", { id: id("expires"), type: "datetime-local", "aria-describedby": id("expires-hint"), "data-keep": true })
  const claimsList = h("div", { class: "claim-rows" })
  const addClaim = h("button", { type: "button", class: "btn btn-small", onclick: () => onAddClaim() }, "Add claim")
  const showClaims = () => {
    claimsList.replaceChildren(...rows.map((row, index) =>
      claimRow(id, row, index, () => {
        rows.splice(index, 1)
        showClaims()
        addClaim.focus()
      })
    ))
    addClaim.disabled = rows.length >= FEDERATED_CLAIMS_MAX
  }
  const onAddClaim = () => {
    rows.push({ name: "", value: "" })
    claimRows.set(rowsKey, rows)
    showClaims()
    document.getElementById(id(`claim-name-${rows.length - 1}`))?.focus()
  }
  showClaims()
  const noIssuer = choices !== null && choices.length === 0
  const button = h(
    "button",
    { type: "submit", class: "btn", disabled: atLimit || noIssuer, "aria-describedby": id("why") },
    "Add federated credential"
  )
  const why = atLimit
    ? `This service holds ${MAX_CREDENTIALS} credentials, the most it may: remove one to add another.`
    : noIssuer
    ? "No trusted issuer allows this profile."
    : "Added at once, not staged: nothing secret is created."
  const details = h(
    "details",
    { class: "key-add fed-add", id: id("add"), "data-keep": true },
    h("summary", null, "Add a federated credential"),
    h(
      "form",
      {
        class: "stack",
        onsubmit: (e) => onAddFederated(e, envName, service, label, { issuer, subject, expires, rows, rowsKey, button, details })
      },
      h(
        "p",
        { class: "hint" },
        "Its workload (a Kubernetes service account, a GitHub Actions job, a SPIFFE workload) sends its token from the issuer as ",
        "client_assertion with the client ID: no secret to keep or rotate."
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: id("issuer") }, "Trusted issuer"),
        issuer,
        h("p", { class: "hint", id: id("issuer-hint") }, issuerHint)
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: id("subject") }, "Subject"),
        subject,
        h(
          "p",
          { class: "hint", id: id("subject-hint") },
          "The token's sub, exactly: system:serviceaccount:<namespace>:<name>, repo:<owner>/<repo>:environment:<name>, spiffe://<trust-domain>/<path>."
        )
      ),
      h(
        "fieldset",
        { class: "choices" },
        h("legend", null, "Other claims (optional)"),
        h("p", { class: "hint" }, "Each claim the token must carry with exactly this string value: GitHub's repository or environment, …"),
        claimsList,
        h("div", null, addClaim)
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: id("expires") }, "Expires (optional)"),
        expires,
        h("p", { class: "hint", id: id("expires-hint") }, "In your local time (sent in UTC); empty: the profile's policy, or never.")
      ),
      h("div", { class: "actions key-actions" }, button, h("p", { class: "hint", id: id("why") }, why))
    )
  )
  return details
}

/** One claim's name and value, with its Remove button. */
function claimRow(id, row, index, onRemove) {
  const name = h("input", {
    id: id(`claim-name-${index}`),
    type: "text",
    maxlength: "128",
    autocomplete: "off",
    spellcheck: "false",
    value: row.name,
    oninput: (e) => (row.name = e.currentTarget.value)
  })
  const value = h("input", {
    id: id(`claim-value-${index}`),
    type: "text",
    maxlength: String(FEDERATED_CLAIM_TEXT_MAX),
    autocomplete: "off",
    spellcheck: "false",
    value: row.value,
    oninput: (e) => (row.value = e.currentTarget.value)
  })
  return h(
    "div",
    { class: "claim-row" },
    h("div", { class: "field" }, h("label", { for: id(`claim-name-${index}`) }, `Claim ${index + 1} name`), name),
    h("div", { class: "field" }, h("label", { for: id(`claim-value-${index}`) }, `Claim ${index + 1} value`), value),
    h(
      "button",
      { type: "button", class: "btn btn-small btn-quiet", "aria-label": `Remove claim ${index + 1}`, onclick: onRemove },
      "Remove"
    )
  )
}

async function onAddFederated(event, envName, service, label, form) {
  event.preventDefault()
  clearMessages()
  form.subject.value = form.subject.value.trim()
  if (!form.issuer.reportValidity() || !form.subject.reportValidity()) return
  const claims = claimsOf(form.rows)
  if (claims.error !== undefined) {
    showAlert(claims.error)
    return
  }
  const body = {
    issuer: form.issuer.value.trim(),
    subject: form.subject.value,
    ...(claims.claims === undefined ? {} : { claims: claims.claims }),
    // The browser's local time, sent as RFC 3339 in UTC.
    ...(form.expires.value === "" ? {} : { expires_at: new Date(form.expires.value).toISOString() })
  }
  const path = `${profilePath(state.doc.profile)}/environments/${enc(envName)}/services/${enc(service.uuid)}/federated-credentials`
  form.button.disabled = true
  let created
  try {
    created = (await api("POST", path, body)).data
  } catch (err) {
    form.button.disabled = false
    fail(err, `Could not add a federated credential to ${label}.`)
    return
  }
  // Emptied and closed: what was typed is now the credential listed above.
  claimRows.delete(form.rowsKey)
  for (const el of form.details.querySelectorAll("[data-keep]")) el.removeAttribute("data-keep")
  form.details.removeAttribute("data-keep")
  if (await reloadProfile()) focusKey(`cred:${envName}:${service.uuid}:${created.client_id}`)
  announce(`Federated credential ${created.client_id} added to ${label}: issuer ${body.issuer}, subject ${body.subject}.`)
}
