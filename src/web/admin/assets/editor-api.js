/*
 * The admin JSON API (docs/contract.md §3) as the page calls it, and its errors in words.
 */
import { MAX_CREDENTIALS } from "./editor-changes.js"
import { state } from "./editor-state.js"

export class ApiError extends Error {
  constructor(kind, status, code, description) {
    super(description || code || kind)
    this.kind = kind
    this.status = status
    this.code = code
    this.description = description
  }
}

/** One call; resolves to `{ status, data }` on 2xx, rejects with an ApiError otherwise. */
export async function api(method, path, body, token) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${token ?? state.token ?? ""}` }
  /** @type {RequestInit} */
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
export function describeError(err) {
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
    case 403:
      return `Your admin token may not do this${detail}.`
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
