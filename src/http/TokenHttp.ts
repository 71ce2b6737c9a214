/**
 * `POST /oauth/token` on the HttpApi app: an adapter of the grant's one decision
 * (`ClientCredentialsGrant`). It reads the body (a form within the size limit; any other body
 * carries no fields) and writes the answer; every outcome is decided there. The fast path
 * (`FastLane`) is the other adapter, for the same decision.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, FiberRef, Layer, Option } from "effect"
import { AdminAccess } from "../admin-auth/AdminAccess.js"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../api/Api.js"
import { ClientCredentialsGrant } from "../auth/ClientCredentialsGrant.js"
import { TokenIntrospection } from "../auth/TokenIntrospection.js"
import { FormClientAuthentication } from "../auth/FormClientAuthentication.js"
import { type FormInput, TokenRevocation } from "../auth/TokenRevocation.js"
import { dpopHeader } from "../auth/DPoPProof.js"
import { NO_STORE } from "../auth/TokenForm.js"
import { toServerResponse } from "./Answer.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { mediaType, readBodyText } from "./RequestBody.js"
import { decidedTokenResult, tokenResultOf } from "../observability/ServiceMetrics.js"
import { wireOf } from "../domain/Errors.js"
import { requestAuthorization } from "./RequestAuthorization.js"

export const issueToken = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const grants = yield* ClientCredentialsGrant
    // Only a form body carries fields; JSON or anything else yields none (docs/contract.md §1).
    const form = mediaType(request) === "application/x-www-form-urlencoded"
      ? yield* Effect.either(readBodyText(request, config.maxBodyBytes))
      : undefined
    if (form !== undefined && form._tag === "Left") {
      yield* FiberRef.set(decidedTokenResult, tokenResultOf(wireOf(form.left).body.error))
      return toServerResponse(errorAnswer(form.left, NO_STORE))
    }
    const { answer, result } = yield* grants.answer({
      authorization: requestAuthorization(request),
      dpop: dpopHeader(request.headers["dpop"]),
      form: form?.right,
      remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
      nowMillis: yield* Clock.currentTimeMillis
    })
    yield* FiberRef.set(decidedTokenResult, result)
    return toServerResponse(answer)
  })

/**
 * A form endpoint beside the token endpoint (`/oauth/revoke`, `/oauth/introspect`): the body read
 * as the token endpoint reads it, the answer decided by `decide`; an answer without a body is empty.
 */
const formEndpoint = <R>(
  request: HttpServerRequest.HttpServerRequest,
  decide: (input: FormInput) => Effect.Effect<Answer, never, R>
) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const form = mediaType(request) === "application/x-www-form-urlencoded"
      ? yield* Effect.either(readBodyText(request, config.maxBodyBytes))
      : undefined
    if (form !== undefined && form._tag === "Left") return toServerResponse(errorAnswer(form.left, NO_STORE))
    const answer = yield* decide({
      authorization: requestAuthorization(request),
      form: form?.right,
      remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
      nowMillis: yield* Clock.currentTimeMillis
    })
    return answer.body === undefined
      ? HttpServerResponse.empty({ status: answer.status, headers: answer.headers })
      : toServerResponse(answer)
  })

export const layer = HttpApiBuilder.group(Api, "token", (handlers) =>
  Effect.gen(function*() {
    const revocation = yield* TokenRevocation
    const introspection = yield* TokenIntrospection
    // Raw: a form body whose repeated, empty or non-form fields must all answer the OAuth error body.
    return handlers
      .handleRaw("issueToken", ({ request }) => issueToken(request))
      .handleRaw("revokeToken", ({ request }) => formEndpoint(request, revocation.answer))
      .handleRaw("introspectToken", ({ request }) => formEndpoint(request, introspection.answer))
  })).pipe(
    Layer.provide([TokenRevocation.layer, TokenIntrospection.layer.pipe(Layer.provide(AdminAccess.layer))]),
    Layer.provide(FormClientAuthentication.layer)
  )
