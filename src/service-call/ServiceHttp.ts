/**
 * `POST /service/{profile}/{env}/json/{uuid}` on the HttpApi app: reads the path and, once the call
 * is let through, the body (within the size limit), and returns the answer of the call's one
 * execution (`ServiceCallExecution`, which the fast lane calls too).
 */
import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Clock, Effect, Runtime } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { Api } from "../server/Api.js"
import { answerOfExecution } from "../server/AnsweredByExecution.js"
import { HotEndpoints } from "../server/HotEndpoints.js"
import { readBodyText } from "../server/RequestBody.js"

export const layer = HttpApiBuilder.group(Api, "service", (handlers) =>
  Effect.gen(function*() {
    const { serviceCall } = yield* HotEndpoints
    const { maxBodyBytes } = yield* AppConfig

    const callService = (
      request: HttpServerRequest.HttpServerRequest,
      path: { readonly profile: string; readonly environment: string; readonly uuid: string }
    ) =>
      Effect.gen(function*() {
        const started = process.hrtime.bigint()
        const nowMillis = yield* Clock.currentTimeMillis
        const runtime = yield* Effect.runtime<never>()
        return yield* answerOfExecution(request, (deliver, fail) =>
          serviceCall(
            {
              request: NodeHttpServerRequest.toIncomingMessage(request),
              response: NodeHttpServerRequest.toServerResponse(request),
              path,
              readBody: (then) =>
                Runtime.runCallback(runtime)(Effect.either(readBodyText(request, maxBodyBytes)), {
                  onExit: (exit) => exit._tag === "Success" ? then(exit.value) : undefined
                }),
              nowMillis,
              started
            },
            deliver,
            fail
          ))
      })

    // Raw: the token is checked before the body is read (RFC 6750), and every answer is written here.
    return handlers.handleRaw("callService", ({ path, request }) => callService(request, path))
  }))
