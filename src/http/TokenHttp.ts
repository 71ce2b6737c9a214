/**
 * `POST /oauth/token` on the HttpApi app: an adapter of the grant's one decision
 * (`ClientCredentialsGrant`). It reads the body (a form within the size limit; any other body
 * carries no fields) and writes the answer; every outcome is decided there. The fast path
 * (`FastLane`) is the other adapter, for the same decision.
 */
import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../api/Api.js"
import { ClientCredentialsGrant } from "../auth/ClientCredentialsGrant.js"
import { dpopHeader } from "../auth/DPoPProof.js"
import { NO_STORE } from "../auth/TokenRequest.js"
import { toServerResponse } from "./Answer.js"
import { errorAnswer } from "../domain/Answer.js"
import { mediaType, readBodyText } from "./RequestBody.js"

export const issueToken = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const grants = yield* ClientCredentialsGrant
    // Only a form body carries fields; JSON or anything else yields none (docs/contract.md §1).
    const form = mediaType(request) === "application/x-www-form-urlencoded"
      ? yield* Effect.either(readBodyText(request, config.maxBodyBytes))
      : undefined
    if (form !== undefined && form._tag === "Left") return toServerResponse(errorAnswer(form.left, NO_STORE))
    const { answer } = yield* grants.answer({
      authorization: request.headers["authorization"],
      dpop: dpopHeader(request.headers["dpop"]),
      form: form?.right,
      remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
      nowMillis: yield* Clock.currentTimeMillis
    })
    return toServerResponse(answer)
  })

export const layer = HttpApiBuilder.group(Api, "token", (handlers) =>
  // Raw: a form body whose repeated, empty or non-form fields must all answer the OAuth error body.
  handlers.handleRaw("issueToken", ({ request }) => issueToken(request)))
