/**
 * An answer as data (status, headers, JSON body), written the same way by both entries of the hot
 * endpoints: `writeAnswer` on a raw node:http response (the fast path), `toServerResponse` as the
 * platform's response (the HttpApi handlers). The platform puts `content-type` and `content-length`
 * after the given headers; `writeAnswer` does the same, so both entries answer byte for byte alike.
 */
import { HttpServerResponse } from "@effect/platform"
import type { ServerResponse } from "node:http"
import { type ServiceError, wireOf } from "../domain/Errors.js"

export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
}

/** The answer of `error`: its wire body and status, `Retry-After` where it has one, then `headers`. */
export const errorAnswer = (error: ServiceError, headers: Readonly<Record<string, string>> = {}): Answer => {
  const { body, status } = wireOf(error)
  const retry = error._tag === "StorageUnavailable"
    ? { "retry-after": "1" }
    : error._tag === "TooManyAttempts" || error._tag === "AdminTooManyAttempts"
    ? { "retry-after": String(error.retryAfterSeconds) }
    : {}
  return { status, headers: { ...retry, ...headers }, body }
}

export const toServerResponse = (answer: Answer): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(answer.body, { status: answer.status, headers: answer.headers })

export const writeAnswer = (response: ServerResponse, answer: Answer): void => {
  const text = JSON.stringify(answer.body)
  response.writeHead(answer.status, {
    ...answer.headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text)
  })
  response.end(text)
}
