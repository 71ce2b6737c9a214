/**
 * `POST /service/{profile}/{env}/json/{uuid}` on the HttpApi app: an adapter of the call's one
 * decision (`ServiceCallGate`). It decides, then reads the body (a JSON object within the size
 * limit) and calls the handler; the fast path (`FastLane`) is the other adapter.
 */
import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Either, Option } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../api/Api.js"
import { dpopHeader } from "../auth/DPoPProof.js"
import { jsonObject, withRateHeaders } from "../gateway/ServiceCallDecision.js"
import { ServiceCallGate } from "../gateway/ServiceCallGate.js"
import { toServerResponse } from "./Answer.js"
import { errorAnswer } from "../domain/Answer.js"
import { readBodyText } from "./RequestBody.js"
import { RequestIds } from "./RequestId.js"
import { requestAuthorization } from "./RequestAuthorization.js"

export const layer = HttpApiBuilder.group(Api, "service", (handlers) =>
  Effect.gen(function*() {
    const gate = yield* ServiceCallGate
    const requestIdOf = yield* RequestIds
    const { maxBodyBytes } = yield* AppConfig

    const callService = Effect.fnUntraced(
      function*(
        request: HttpServerRequest.HttpServerRequest,
        path: { readonly profile: string; readonly environment: string; readonly uuid: string }
      ) {
        const verdict = yield* gate.decide({
          ...path,
          authorization: requestAuthorization(request),
          dpop: dpopHeader(request.headers["dpop"]),
          remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
          nowMillis: yield* Clock.currentTimeMillis
        })
        if (verdict._tag === "Answer") return toServerResponse(verdict.answer)
        const text = yield* Effect.either(readBodyText(request, maxBodyBytes))
        const body = Either.flatMap(text, jsonObject)
        if (Either.isLeft(body)) return toServerResponse(withRateHeaders(verdict, errorAnswer(body.left)))
        const requestId = requestIdOf(request.source)
        const answer = yield* gate.call(verdict, body.right, text.pipe(Either.getOrElse(() => "")), requestId)
        return toServerResponse(withRateHeaders(verdict, answer))
      }
    )

    // Raw: the token is checked before the body is read (RFC 6750), and every answer is written here.
    return handlers.handleRaw("callService", ({ path, request }) => callService(request, path))
  }))
