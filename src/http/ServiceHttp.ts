/**
 * `POST /service/{profile}/{env}/json/{uuid}`, in the contract's order: find the service (404);
 * for an `oauth` service authenticate the Bearer token (RFC 6750) before the body is read; then read
 * the body (a JSON object within the size limit); then call the handler.
 *
 * One indexed read per request finds the service and tells whether the token's credential is still
 * live, so a deletion acknowledged by any instance is refused by every instance on the next request.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Option } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Api } from "../api/Api.js"
import { TokenService } from "../auth/TokenService.js"
import { BadGateway, InvalidRequest, InvalidToken, NotFound } from "../domain/Errors.js"
import { type JsonObject, ServiceHandlers } from "../gateway/ServiceHandlers.js"
import { CredentialRepo, serviceAddress, spanAttributes } from "../storage/CredentialRepo.js"
import { tracerEnabled } from "../Tracing.js"
import { parseAuthorization } from "./AuthorizationHeader.js"
import { errorResponse } from "./ErrorResponses.js"
import { describeDefect } from "./ServerErrors.js"
import { parseJson, readBodyText } from "./RequestBody.js"

const REALM = `Bearer realm="service"`
const challenge = (error?: "invalid_request" | "invalid_token" | "insufficient_scope") => ({
  "www-authenticate": error === undefined ? REALM : `${REALM}, error="${error}"`
})

const serviceNotFound = new NotFound({ description: "Service not found" })

/** What the request presented: no credentials, something that is not one `Bearer <token>`, or a token. */
type Presented =
  | { readonly _tag: "None" }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "Bearer"; readonly token: string }

export const presentedCredentials = (header: string | undefined): Presented => {
  if (header === undefined) return { _tag: "None" }
  const credentials = parseAuthorization(header)
  return credentials?.scheme === "bearer" ? { _tag: "Bearer", token: credentials.value } : { _tag: "Malformed" }
}

/** A service call's body: a JSON object (within the nesting limit). */
export const jsonObject = (text: string): Either.Either<JsonObject, InvalidRequest> =>
  Either.flatMap(parseJson(text), (body) =>
    typeof body === "object" && body !== null && !Array.isArray(body)
      ? Either.right(body as JsonObject)
      : Either.left(new InvalidRequest({ description: "The request body must be a JSON object" })))

/** The headers of a service call's 200 answer. */
export const SERVICE_ANSWER_HEADERS = { "cache-control": "no-store" } as const

const readJsonObject = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  Effect.flatMap(readBodyText(request, maxBytes), jsonObject)

export const layer = HttpApiBuilder.group(Api, "service", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* CredentialRepo
    const tokens = yield* TokenService
    const serviceHandlers = yield* ServiceHandlers
    const { maxBodyBytes } = yield* AppConfig
    // What only a trace needs is done only when traces are exported: a no-op span is not free.
    const traced = yield* tracerEnabled

    const callService = Effect.fn("ServiceHttp.callService", { captureStackTrace: false })(
      function*(
        request: HttpServerRequest.HttpServerRequest,
        path: { readonly profile: string; readonly environment: string; readonly uuid: string }
      ) {
        const address = serviceAddress(path.profile, path.environment, path.uuid)
        if (address === undefined) return errorResponse(serviceNotFound)

        // The signature is checked before the read so the read can also answer "is its credential live".
        const presented = presentedCredentials(request.headers["authorization"])
        const verified = presented._tag === "Bearer" ? yield* Effect.either(tokens.verify(presented.token)) : undefined
        const clientId = verified !== undefined && Either.isRight(verified)
          ? Option.some(verified.right.client_id)
          : Option.none()

        if (traced) yield* Effect.annotateCurrentSpan(spanAttributes(address, clientId))
        const route = yield* repo.findServiceRoute(address, clientId)
        if (Option.isNone(route)) return errorResponse(serviceNotFound)

        let caller: string | null = null
        if (route.value.authType === "oauth") {
          if (presented._tag === "None") {
            return errorResponse(new InvalidToken({ description: "An access token is required" }), challenge())
          }
          if (presented._tag === "Malformed" || verified === undefined) {
            return errorResponse(
              new InvalidRequest({ description: "The Authorization header must be a single Bearer token" }),
              challenge("invalid_request")
            )
          }
          if (Either.isLeft(verified)) {
            return verified.left._tag === "InsufficientScope"
              ? errorResponse(verified.left, challenge("insufficient_scope"))
              : errorResponse(verified.left, challenge("invalid_token"))
          }
          if (!tokens.isForService(verified.right, address)) {
            return errorResponse(
              new InvalidToken({ description: "The access token was issued for another service" }),
              challenge("invalid_token")
            )
          }
          if (!route.value.credentialLive) {
            return errorResponse(
              new InvalidToken({ description: "The access token has been revoked" }),
              challenge("invalid_token")
            )
          }
          caller = verified.right.client_id
        }

        const body = yield* readJsonObject(request, maxBodyBytes)
        const answer = yield* Effect.suspend(() =>
          serviceHandlers.resolve(address, route.value.handler)({ address, clientId: caller, body })
        ).pipe(
          // The stored handler type: a handler registered in code for this uuid runs in its place.
          (handling) =>
            traced
              ? Effect.withSpan(handling, "ServiceHandlers.call", {
                captureStackTrace: false,
                attributes: { "service_auth.handler.configured": route.value.handler.type }
              })
              : handling,
          // A handler registered in code that throws has failed, like one that fails: 502, not 500.
          Effect.catchAllDefect((defect) =>
            Effect.zipRight(
              Effect.logError(`Service handler failed: ${describeDefect(Cause.die(defect))}`),
              Effect.fail(new BadGateway({ description: "The service's handler failed" }))
            )
          )
        )
        return HttpServerResponse.unsafeJson(answer, { status: 200, headers: SERVICE_ANSWER_HEADERS })
      },
      Effect.catchAll((failure) => Effect.succeed(errorResponse(failure)))
    )

    // Raw: the token is checked before the body is read (RFC 6750), and every answer is written here.
    return handlers.handleRaw("callService", ({ path, request }) => callService(request, path))
  }))
