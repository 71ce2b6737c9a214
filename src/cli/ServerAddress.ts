/**
 * The server the CLI talks to: its base URL as given (`--url`, `SERVICE_AUTH_URL`), checked, and
 * why a request to it got no answer, in words an operator can act on.
 */
import { Effect, Schema } from "effect"

/** `--url` / `SERVICE_AUTH_URL` is not an http(s) base URL. */
export class InvalidServerUrl extends Schema.TaggedError<InvalidServerUrl>()("InvalidServerUrl", {
  message: Schema.String
}) {}

/** The base URL without a trailing slash; a path prefix is kept (a server behind a reverse proxy). */
export const parseServerUrl = (raw: string): Effect.Effect<string, InvalidServerUrl> => {
  const invalid = (why: string) =>
    new InvalidServerUrl({ message: `invalid server URL ${JSON.stringify(raw)} (--url or SERVICE_AUTH_URL): ${why}` })
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Effect.fail(invalid("not an absolute URL, e.g. http://localhost:3000"))
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return Effect.fail(invalid("only http and https are spoken"))
  // The token goes in a header; credentials in the URL would be a second, leakier secret.
  if (url.username !== "" || url.password !== "") return Effect.fail(invalid("it must not carry a user name or password"))
  if (url.search !== "" || url.hash !== "") return Effect.fail(invalid("it must not carry a query or a fragment"))
  return Effect.succeed(`${url.origin}${url.pathname.replace(/\/+$/, "")}`)
}

/** The node error code (ECONNREFUSED, ...) and the innermost message down a fetch failure's causes. */
const innermost = (cause: unknown): { readonly code: string | undefined; readonly message: string } => {
  let code: string | undefined
  let message = cause instanceof Error ? cause.message : String(cause)
  for (let current = cause, depth = 0; current instanceof Error && depth < 5; depth++) {
    const own = (current as { code?: unknown }).code
    if (code === undefined && typeof own === "string") code = own
    message = current.message
    current = current.cause
  }
  return { code, message }
}

/** Why a server could not be reached, and what to check (by default: is it there at all). */
export interface TransportProblem {
  readonly reason: string
  readonly hint: string
}

export const CHECK_ADDRESS = "is it running? is --url or SERVICE_AUTH_URL right?"
/** Certificates signed by no CA Node knows: a self-signed one, or a private CA's. */
const UNTRUSTED_ISSUER = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_UNTRUSTED"
])
const TRUST_A_CA = "NODE_EXTRA_CA_CERTS=/path/to/ca.pem makes the CLI trust that CA"

export const transportProblem = (cause: unknown): TransportProblem => {
  const { code, message } = innermost(cause)
  const plain = (reason: string) => ({ reason, hint: CHECK_ADDRESS })
  switch (code) {
    case "ECONNREFUSED":
      return plain("connection refused")
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return plain("host not found")
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return plain("the connection was closed before an answer")
    case "ETIMEDOUT":
    case "UND_ERR_CONNECT_TIMEOUT":
      return plain("the connection timed out")
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return plain("host unreachable")
    case "EPROTO":
    case "ERR_SSL_WRONG_VERSION_NUMBER":
      return { reason: `it does not speak TLS there (${code})`, hint: "use http:// for a server without TLS_CERT_FILE" }
    case undefined:
      return plain(message)
  }
  if (UNTRUSTED_ISSUER.has(code)) {
    return {
      reason: `its TLS certificate is not trusted (${code})`,
      hint: `a self-signed certificate or a private CA's: ${TRUST_A_CA}`
    }
  }
  return code.includes("CERT") || code.includes("SELF_SIGNED")
    ? { reason: `its TLS certificate was refused (${code})`, hint: `check the server's certificate; ${TRUST_A_CA}` }
    : plain(code)
}
