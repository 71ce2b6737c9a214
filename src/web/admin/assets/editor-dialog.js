/*
 * The confirmation dialog: modal (the rest of the page is inert), focus trapped, Escape or a click
 * on the backdrop cancels, and focus returns to the button that opened it.
 */
import { h, nextId } from "./editor-dom.js"

let current = null

const FOCUSABLE = "button, [href], input, select, textarea, [tabindex]:not([tabindex='-1'])"

/** Opens the dialog; `onConfirm` runs after it closed with the confirm button. */
export function openDialog({ title, body, confirmLabel, onConfirm, returnFocus }) {
  closeDialog(false, true)
  const titleId = nextId("dialog-title")
  const descId = nextId("dialog-desc")
  const cancel = h("button", { type: "button", class: "btn" }, "Cancel")
  const confirm = h("button", { type: "button", class: "btn btn-danger" }, confirmLabel)
  const dialog = h(
    "div",
    { class: "dialog", role: "dialog", "aria-modal": "true", "aria-labelledby": titleId, "aria-describedby": descId },
    h("h2", { id: titleId }, title),
    h("div", { id: descId, class: "dialog-body" }, body),
    h("div", { class: "dialog-actions" }, cancel, confirm)
  )
  const backdrop = h("div", { class: "backdrop" }, dialog)
  const background = /** @type {Array<HTMLElement>} */ (Array.from(document.body.children)).filter((el) =>
    el.id !== "dialog-root" && el.id !== "messages"
  )
  for (const el of background) el.inert = true
  document.body.classList.add("dialog-open")

  const onKey = (e) => {
    if (e.key === "Escape") {
      e.preventDefault()
      e.stopPropagation()
      closeDialog(false)
    } else if (e.key === "Tab") {
      const focusables = Array.from(dialog.querySelectorAll(FOCUSABLE)).filter((el) => !el.disabled)
      if (focusables.length === 0) return
      const first = focusables[0]
      const last = focusables[focusables.length - 1]
      const outside = !dialog.contains(document.activeElement)
      if (e.shiftKey && (document.activeElement === first || outside)) {
        e.preventDefault()
        last.focus()
      } else if (!e.shiftKey && (document.activeElement === last || outside)) {
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

  current = { backdrop, background, onKey, onFocusIn, onConfirm, returnFocus }
  document.getElementById("dialog-root").appendChild(backdrop)
  cancel.focus()
}

/** Closes the dialog if one is open; `silent` skips both the callback and the focus return. */
export function closeDialog(confirmed, silent) {
  const d = current
  if (!d) return
  current = null
  document.removeEventListener("keydown", d.onKey, true)
  document.removeEventListener("focusin", d.onFocusIn)
  d.backdrop.remove()
  for (const el of d.background) el.inert = false
  document.body.classList.remove("dialog-open")
  if (silent) return
  if (confirmed) d.onConfirm()
  else if (d.returnFocus && d.returnFocus.isConnected) d.returnFocus.focus()
}
