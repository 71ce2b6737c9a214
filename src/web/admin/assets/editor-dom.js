/*
 * DOM helpers of the profile editor: element building (text nodes only, never HTML), focus, dates,
 * and the two aria-live regions (alert and status) that exist from page load.
 */

import { NAME_INPUT_PATTERN, NAME_MAX_LENGTH } from "./Limits.js"

export const NAME_HINT = `Letters, digits, '.', '_' or '-', starting with a letter or digit (at most ${NAME_MAX_LENGTH}).`

let uid = 0
/** A fresh id for elements that only need to be unique on the page. */
export const nextId = (prefix) => `${prefix}-${++uid}`

/** Builds an element; strings among the children become text nodes (never parsed as HTML). */
export function h(tag, props, ...children) {
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

/** Replaces the children of `el`, skipping null/false entries (which the DOM would print as text). */
export function replaceContent(el, ...children) {
  el.replaceChildren()
  append(el, children)
}

export const main = () => document.getElementById("main")

/** A text field for a profile or environment name, checked as the server checks it. */
export function identifierField(id, name, hintId) {
  return h("input", {
    id,
    name,
    type: "text",
    required: true,
    pattern: NAME_INPUT_PATTERN,
    maxlength: String(NAME_MAX_LENGTH),
    autocomplete: "off",
    spellcheck: "false",
    autocapitalize: "off",
    "aria-describedby": hintId
  })
}

const dateFormat = (() => {
  try {
    return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" })
  } catch {
    return null
  }
})()

export function timeEl(iso) {
  if (iso === null || iso === undefined) return h("span", { class: "never" }, "never")
  const date = new Date(iso)
  if (Number.isNaN(date.getTime()) || !dateFormat) return h("span", null, String(iso))
  return h("time", { datetime: String(iso), title: String(iso) }, dateFormat.format(date))
}

export function focusEl(el) {
  if (!el) return false
  if (!el.hasAttribute("tabindex") && !/^(A|BUTTON|INPUT|SELECT|TEXTAREA)$/.test(el.tagName)) {
    el.setAttribute("tabindex", "-1")
  }
  el.focus()
  return document.activeElement === el
}

/** Focuses the first enabled element carrying one of the given `data-focus` keys. */
export function focusKey(...keys) {
  for (const key of keys) {
    if (!key) continue
    const el = /** @type {HTMLButtonElement | null} */ (document.querySelector(`[data-focus="${CSS.escape(key)}"]`))
    if (el && !el.disabled && focusEl(el)) return true
  }
  return false
}

// Messages

export function showAlert(text) {
  const el = document.getElementById("alert")
  document.getElementById("status").textContent = ""
  // Clear first so that the same message twice is announced again.
  el.textContent = ""
  window.setTimeout(() => {
    replaceContent(el, h("span", { class: "alert-icon", "aria-hidden": "true" }, "!"), h("span", null, text))
  }, 30)
}

export function announce(text) {
  const el = document.getElementById("status")
  el.textContent = ""
  window.setTimeout(() => {
    el.textContent = text
  }, 30)
}

export function clearMessages() {
  document.getElementById("alert").textContent = ""
  document.getElementById("status").textContent = ""
}

/**
 * Copies `value` to the clipboard; when the Clipboard API is missing or hangs, selects `selectEl`
 * (an input or any element) for Ctrl+C and says so. `what` names the value in the announcement.
 */
export async function copyText(value, selectEl, what) {
  const timeout = new Promise((_, reject) => window.setTimeout(() => reject(new Error("timeout")), 2000))
  try {
    if (!navigator.clipboard || !window.isSecureContext) throw new Error("no clipboard")
    await Promise.race([navigator.clipboard.writeText(value), timeout])
    announce(`${what} copied to the clipboard.`)
  } catch {
    if (selectEl instanceof HTMLInputElement) {
      selectEl.focus()
      selectEl.select()
    } else if (selectEl) {
      const range = document.createRange()
      range.selectNodeContents(selectEl)
      const selection = window.getSelection()
      selection.removeAllRanges()
      selection.addRange(range)
    }
    let copied = false
    try {
      copied = document.execCommand("copy")
    } catch {
      copied = false
    }
    announce(
      copied
        ? `${what} copied to the clipboard.`
        : `Copying is not available here. The ${what.toLowerCase()} is selected: press Ctrl+C (⌘C on a Mac) to copy it.`
    )
  }
}

/**
 * A read-only field with its Copy button: a textarea, so that on a narrow screen a client id, a
 * secret or an admin token wraps and can be read whole instead of being cut off at the field's edge.
 * `primary` makes the button the page's main action (for what is shown once).
 */
export function copyField(id, label, value, what, buttonLabel, props, primary = false) {
  const input = h("textarea", {
    id,
    rows: "1",
    wrap: "soft",
    readonly: true,
    class: "mono",
    spellcheck: "false",
    autocomplete: "off",
    value,
    onfocus: (e) => e.currentTarget.select(),
    ...props
  })
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    h(
      "div",
      { class: "copy-row" },
      input,
      h(
        "button",
        { type: "button", class: `btn${primary ? " btn-primary" : ""}`, onclick: () => copyText(input.value, input, what) },
        buttonLabel
      )
    )
  )
}
