/**
 * An answer as data: the status, headers and JSON body a decision ends in (`decideToken`,
 * `decideServiceCall`, the upstream gateway). Written onto a response by `server/WriteAnswer.ts`, the same
 * way on both entries of the hot endpoints; the decisions themselves know nothing of HTTP servers.
 */
import { type ServiceError, wireOf } from "./Errors.js"

export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
}

/** The headers of a service call's answer from its handler (an upstream's passed-on answer adds `Retry-After`). */
export const SERVICE_ANSWER_HEADERS = { "cache-control": "no-store" } as const

/** The answer of `error`: its wire body and status, `Retry-After` where it has one, then `headers`. */
export const errorAnswer = (error: ServiceError, headers: Readonly<Record<string, string>> = {}): Answer => {
  const { body, status } = wireOf(error)
  const retry = error._tag === "StorageUnavailable"
    ? { "retry-after": "1" }
    : error._tag === "TooManyAttempts" || error._tag === "AdminTooManyAttempts" || error._tag === "RateLimited"
    ? { "retry-after": String(error.retryAfterSeconds) }
    : {}
  return { status, headers: { ...retry, ...headers }, body }
}
