/**
 * How the admin API reads bodies and answers what it cannot decode, so that its handlers are typed
 * HttpApi handlers and every answer stays the contract's:
 *
 * - `layer` (the `AdminBodies` middleware) provides, in place of the request, one whose JSON is
 *   read by `readBodyText` and `parseJson`: the size limit (413 before anything is read when the
 *   declared length is over it), the nesting limit, any Content-Type read as JSON, no body as `{}`.
 *   Nothing is read until HttpApi decodes the payload, after the admin token and the path. A body
 *   refused there reaches HttpApi as a defect (it reads JSON with `orDie`), `BodyRefused`.
 * - `decodeFailureAnswer` turns HttpApi's decode failure (a path parameter or the payload) into the
 *   contract's `400 invalid_request` with the first problem as `path: message`, never the value
 *   sent; a path parameter's problem is its message alone, as it always was.
 */
import { type HttpApiError, HttpServerRequest } from "@effect/platform"
import { Data, Effect, Layer } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { AdminBodies } from "./AdminApi.js"
import { InvalidRequest, type PayloadTooLarge } from "../domain/Errors.js"
import { describeRequestIssues } from "./DecodeFailure.js"
import { readBodyText } from "../server/RequestBody.js"
import { parseJson } from "../domain/Json.js"

/** A body the reader refused, on its way through HttpApi's payload decoding. */
export class BodyRefused extends Data.TaggedError("BodyRefused")<{ readonly error: InvalidRequest | PayloadTooLarge }> {}

const readJson = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  Effect.gen(function*() {
    const text = yield* readBodyText(request, maxBytes)
    return text.trim() === "" ? {} : yield* parseJson(text)
  }).pipe(Effect.mapError((error) => new BodyRefused({ error })))

export const layer = Layer.effect(
  AdminBodies,
  Effect.map(AppConfig, ({ maxBodyBytes }) =>
    Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
      // The request itself, but for its JSON and the media type HttpApi chooses its reader by.
      Object.create(request, {
        json: { get: () => readJson(request, maxBodyBytes) },
        headers: { get: () => ({ ...request.headers, "content-type": "application/json" }) }
      }) as HttpServerRequest.HttpServerRequest))
)

export const decodeFailureAnswer = (failure: HttpApiError.HttpApiDecodeError): InvalidRequest =>
  new InvalidRequest({ description: describeRequestIssues(failure.issues) })
