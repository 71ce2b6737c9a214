/**
 * `POST /oauth/token` on the HttpApi app: reads the body (a form within the size limit; any other
 * body carries no fields) and returns the answer of the endpoint's one execution
 * (`TokenExecution`, which the fast lane calls too).
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Clock, Effect, Layer, Option } from "effect"
import { AdminAccess } from "../admin/AdminAccess.js"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../server/Api.js"
import { TokenIntrospection } from "./TokenIntrospection.js"
import { FormClientAuthentication } from "./FormClientAuthentication.js"
import { type FormInput, TokenRevocation } from "./TokenRevocation.js"
import { NO_STORE } from "./TokenForm.js"
import { toServerResponse } from "../server/WriteAnswer.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { answerOfExecution } from "../server/AnsweredByExecution.js"
import { HotEndpoints } from "../server/HotEndpoints.js"
import { mediaType, readBodyText } from "../server/RequestBody.js"
import { requestAuthorization } from "../server/RequestAuthorization.js"

export const issueToken = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const started = process.hrtime.bigint()
    const config = yield* AppConfig
    const { token } = yield* HotEndpoints
    // Only a form body carries fields; JSON or anything else yields none (docs/contract.md §1).
    const form = mediaType(request) === "application/x-www-form-urlencoded"
      ? yield* Effect.either(readBodyText(request, config.maxBodyBytes))
      : undefined
    const nowMillis = yield* Clock.currentTimeMillis
    return yield* answerOfExecution(request, (deliver, fail) =>
      token({ request: NodeHttpServerRequest.toIncomingMessage(request), form, nowMillis, started }, deliver, fail))
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
