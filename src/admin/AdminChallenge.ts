/**
 * The admin API's Bearer challenge (RFC 6750 §3): every 401 it answers (no admin token, one that is
 * not `Bearer <token>`, a token that matches none) carries `WWW-Authenticate: Bearer realm="admin"`,
 * as the metrics endpoint's carry `realm="metrics"` and the service call's `realm="service"`. The
 * 401 is the `AdminAuth` middleware's failure, which becomes an answer only when the request's
 * answer is written; a pre-response handler, installed for the admin API's paths around the app,
 * adds the header there, so that no admin 401 leaves without it.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

export const ADMIN_CHALLENGE = `Bearer realm="admin"`

/** Whether a request path belongs to the admin API (the editor's page, `/admin`, is not behind the token). */
const isAdminApi = (url: string) => url.startsWith("/admin/")

/** On the answer as it is written: a failure of the app is answered after the app has returned. */
const challengeUnauthorized: HttpApp.PreResponseHandler = (_request, response) =>
  Effect.succeed(
    response.status === 401 && response.headers["www-authenticate"] === undefined
      ? HttpServerResponse.setHeader(response, "www-authenticate", ADMIN_CHALLENGE)
      : response
  )

export const adminChallenge = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) => isAdminApi(request.url) ? Effect.zipRight(HttpApp.appendPreResponseHandler(challengeUnauthorized), app) : app
  )
