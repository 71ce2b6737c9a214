/**
 * The last line of defence around the whole app: an unknown route answers a JSON 404 (405 with
 * `Allow` when the path exists and only the method is wrong), and a defect
 * (a bug) answers a JSON 500 without detail while it is logged once. No stack trace or SQL ever
 * reaches a client, and the log never echoes what the client sent (see `describeDefect`).
 */
import { HttpApiBuilder, type HttpApiError, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect } from "effect"
import type { AdminTooManyAttempts } from "../domain/Errors.js"
import { BodyRefused, decodeFailureAnswer } from "../admin/AdminBodies.js"
import { describeDefect } from "../observability/Defects.js"
import { errorResponse } from "./ErrorResponses.js"
import { allowedMethods } from "./Routes.js"

export const notFound = (method: string) =>
  HttpServerResponse.unsafeJson(
    { error: "not_found", error_description: `No ${method} endpoint at this path` },
    { status: 404 }
  )

/**
 * OpenID Connect discovery, which clients such as openid-client try by default: this server is an
 * OAuth 2.0 authorization server and no OpenID Provider (no authorization endpoint, no ID tokens,
 * none of the fields OpenID Connect Discovery §3 requires), so it is not served; the 404 says where
 * the RFC 8414 metadata is and how to ask for it (docs/integrators.md).
 */
export const OPENID_CONFIGURATION_PATH = "/.well-known/openid-configuration"
const openidConfigurationNotFound = HttpServerResponse.unsafeJson(
  {
    error: "not_found",
    error_description: "This is an OAuth 2.0 authorization server, not an OpenID Connect provider: its metadata " +
      "is at /.well-known/oauth-authorization-server (RFC 8414). With openid-client, discover it with " +
      "algorithm: \"oauth2\"."
  },
  { status: 404 }
)

/** RFC 9110 §15.5.6: the path exists, the method does not; `Allow` lists what it does answer. */
const methodNotAllowed = (method: string, allowed: ReadonlyArray<string>, pathname: string) =>
  HttpServerResponse.unsafeJson(
    {
      error: "method_not_allowed",
      error_description: `The ${method} method is not allowed here; this path accepts ${allowed.join(", ")}`
    },
    {
      status: 405,
      headers: {
        allow: allowed.join(", "),
        // Every answer of the token endpoint is uncacheable (RFC 6749 §5.1), this one included.
        ...(pathname === "/oauth/token" ? { "cache-control": "no-store", pragma: "no-cache" } : {})
      }
    }
  )

const internalError = HttpServerResponse.unsafeJson(
  { error: "server_error", error_description: "Internal server error" },
  { status: 500 }
)

const jsonErrors = (app: HttpApp.Default): HttpApp.Default =>
  Effect.catchAllCause(app, (cause) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some" && (failure.value as { _tag?: string })._tag === "RouteNotFound") {
        // A known path asked with a method it does not answer is 405; a path it does not have (or a
        // known method the router could not match, say an over-long segment) stays 404.
        // Not `new URL`: a path such as "//" is not a relative URL, and must not become a 500.
        const pathname = request.url.split("?")[0]!
        const allowed = allowedMethods(pathname)
        return allowed.length > 0 && !allowed.includes(request.method)
          ? methodNotAllowed(request.method, allowed, pathname)
          : pathname === OPENID_CONFIGURATION_PATH && (request.method === "GET" || request.method === "HEAD")
          ? openidConfigurationNotFound
          : notFound(request.method)
      }
      // A path parameter or payload that does not decode: the contract's 400, said once for all.
      if (failure._tag === "Some" && (failure.value as { _tag?: string })._tag === "HttpApiDecodeError") {
        return errorResponse(decodeFailureAnswer(failure.value as HttpApiError.HttpApiDecodeError))
      }
      // A body the admin API's reader refused, passed through HttpApi as a defect (AdminBodies).
      const refused = Cause.dieOption(cause)
      if (refused._tag === "Some" && refused.value instanceof BodyRefused) return errorResponse(refused.value.error)
      // The admin throttle's 429 carries Retry-After, which HttpApi's encoding of a failure cannot add.
      if (failure._tag === "Some" && (failure.value as { _tag?: string })._tag === "AdminTooManyAttempts") {
        return errorResponse(failure.value as AdminTooManyAttempts)
      }
      // Typed failures are encoded by HttpApi from the endpoints' error schemas.
      if (failure._tag === "Some" || Cause.isInterruptedOnly(cause)) return yield* Effect.failCause(cause)
      yield* Effect.logError(`Unhandled failure answering a ${request.method} request: ${describeDefect(cause)}`)
      return internalError
    }))

/** Installs `jsonErrors` inside HttpApi, where route misses and defects are still failures, not yet responses. */
export const layerJsonErrors = HttpApiBuilder.middleware(jsonErrors)

/**
 * A 413 is answered before the rest of the body is read; `Connection: close` makes Node end the
 * connection after the answer instead of reading (and discarding) whatever the client still sends.
 */
export const closeAfterPayloadTooLarge = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.map(app, (response) => response.status === 413 ? HttpServerResponse.setHeader(response, "connection", "close") : response)
