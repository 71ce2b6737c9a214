/**
 * The fast path: the two hot endpoints (`POST /oauth/token` and the service call) taken on
 * node:http, in front of the HttpApi app, and handed to the same executions the app's handlers call
 * (`HotEndpoints`): this file only reads the request (its path and its declared-length body) and
 * writes the answer it is given, so everything after the request is read exists once.
 *
 * A profile of both endpoints under load put most of the event loop's time in the framework around
 * the handlers (request and response wrappers, the router, fibers and their context), not in the
 * handlers' own work; the executions answer what needs nothing but memory synchronously.
 *
 * What the lane does not take is handed to the app (`next`), which answers it through the same
 * executions: other methods and paths, percent-encoded paths, chunked bodies or bodies over the
 * limit (the app's 413 closes the connection). A body the lane has already read travels with the
 * request (`rememberBody`).
 */
import { Context, Effect, Either, Layer } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { AppConfig } from "../config/AppConfig.js"
import type { Answer } from "../domain/Answer.js"
import { writeAnswer } from "./WriteAnswer.js"
import { HotEndpoints } from "./HotEndpoints.js"
import { mediaTypeOf, rememberBody } from "./RequestBody.js"

/** Answers the request and returns, or calls `next` to let the HttpApi app answer it. */
export type FastLaneShape = (request: IncomingMessage, response: ServerResponse, next: () => void) => void

export class FastLane extends Context.Tag("service-auth/FastLane")<FastLane, FastLaneShape>() {}

/** Only plain paths: percent-encoded or otherwise unusual ones go to the router, which decodes them. */
const SERVICE_PATH = /^\/service\/([A-Za-z0-9._-]+)\/([A-Za-z0-9._-]+)\/json\/([0-9A-Fa-f-]{36})$/

/** The declared length when the body has one within the limit; chunked or larger bodies are the app's. */
const declaredLength = (request: IncomingMessage, maxBytes: number): number | undefined => {
  const declared = request.headers["content-length"]
  if (declared === undefined || request.headers["transfer-encoding"] !== undefined) return undefined
  const length = Number(declared)
  return Number.isInteger(length) && length >= 0 && length <= maxBytes ? length : undefined
}

const make = Effect.gen(function*() {
  const config = yield* AppConfig
  const executions = yield* HotEndpoints
  const clock = yield* Effect.clock

  /** Writes the answer, unless the connection has gone or an answer has begun: whether it did. */
  const write = (response: ServerResponse) => (answer: Answer): boolean => {
    if (response.headersSent || response.destroyed) return false
    writeAnswer(response, answer)
    return true
  }

  /**
   * Reads the declared-length body. `then` is guarded: if it throws, the app answers (the request is
   * handed over once, with the body read, which it cannot read again) or, when an answer has begun,
   * the connection is closed. An exception must never escape into a Node event handler.
   */
  const readBody = (request: IncomingMessage, response: ServerResponse, next: () => void, then: (text: string) => void) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.once("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      try {
        then(text)
      } catch {
        if (response.headersSent) response.destroy()
        else {
          rememberBody(request, text)
          next()
        }
      }
    })
    request.once("error", () => response.destroy())
  }

  const token = (request: IncomingMessage, response: ServerResponse, next: () => void, started: bigint) =>
    readBody(request, response, next, (text) =>
      executions.token(
        {
          request,
          form: mediaTypeOf(request.headers["content-type"]) === "application/x-www-form-urlencoded" ? Either.right(text) : undefined,
          nowMillis: clock.unsafeCurrentTimeMillis(),
          started
        },
        write(response),
        () => response.destroy()
      ))

  const serviceCall = (
    request: IncomingMessage,
    response: ServerResponse,
    next: () => void,
    path: RegExpExecArray,
    started: bigint
  ) => {
    let bodyRead = false
    executions.serviceCall(
      {
        request,
        response,
        path: { profile: path[1]!, environment: path[2]!, uuid: path[3]! },
        readBody: (then) => {
          bodyRead = true
          readBody(request, response, next, (text) => then(Either.right(text)))
        },
        nowMillis: clock.unsafeCurrentTimeMillis(),
        started
      },
      (answer) => {
        // Refused before the body is read: Node discards the unread body.
        if (!bodyRead) request.resume()
        return write(response)(answer)
      },
      () => response.destroy()
    )
  }

  const lane: FastLaneShape = (request, response, next) => {
    if (request.method !== "POST" || declaredLength(request, config.maxBodyBytes) === undefined) return next()
    const url = request.url ?? ""
    const started = process.hrtime.bigint()
    // The app answers a request at most once, whatever happens here.
    let handedOver = false
    const handOver = () => {
      if (handedOver) return
      handedOver = true
      next()
    }
    // An exception must never escape into Node's request event, where it would stop the process:
    // the app answers instead (a body already read travels with the request), or, when an answer
    // has begun, the connection is closed.
    try {
      if (url === "/oauth/token") return token(request, response, handOver, started)
      const path = SERVICE_PATH.exec(url)
      if (path === null) return handOver()
      return serviceCall(request, response, handOver, path, started)
    } catch {
      if (response.headersSent) response.destroy()
      else handOver()
    }
  }
  return lane
})

export const layer = Layer.effect(FastLane, make)
