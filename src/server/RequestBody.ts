/**
 * Reading request bodies ourselves, with a size limit: a declared Content-Length over the limit is
 * refused before anything is read, and a body that grows past it while streaming stops being read
 * (the 413 answer then closes the connection: see `closeAfterPayloadTooLarge`).
 * JSON is parsed here (`parseJson`, with a nesting limit) rather than by the platform, whose
 * reader answers invalid JSON with a 500; the admin API hands it to HttpApi (`AdminBodies`).
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import type { IncomingMessage } from "node:http"
import { InvalidRequest, PayloadTooLarge } from "../domain/Errors.js"

export const payloadTooLarge = (maxBytes: number) => new PayloadTooLarge({ description: `Request body exceeds ${maxBytes} bytes` })

/** The media type of the request, lower-cased, without parameters ("" when absent). */
export const mediaTypeOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]!.trim().toLowerCase()
export const mediaType = (request: HttpServerRequest.HttpServerRequest): string => mediaTypeOf(request.headers["content-type"])

/**
 * Bodies the fast lane read before it handed the request over (`FastLane`): the stream is consumed,
 * so `readBodyText` answers from here.
 */
const alreadyRead = new WeakMap<IncomingMessage, string>()
/** The body the fast lane read before handing `incoming` over, if it did. */
export const bodyAlreadyRead = (incoming: IncomingMessage): string | undefined => alreadyRead.get(incoming)
export const rememberBody = (incoming: IncomingMessage, text: string): void => void alreadyRead.set(incoming, text)

export const readBodyText = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<string, PayloadTooLarge | InvalidRequest> => {
  const declared = request.headers["content-length"]
  if (declared !== undefined && Number(declared) > maxBytes) return Effect.fail(payloadTooLarge(maxBytes))
  // Read from the Node stream: the platform's reader destroys the socket when the limit is
  // exceeded, so a chunked body over the limit would get no answer at all instead of a 413.
  const incoming = NodeHttpServerRequest.toIncomingMessage(request)
  const read = bodyAlreadyRead(incoming)
  if (read !== undefined) return Effect.succeed(read)
  return Effect.async<string, PayloadTooLarge | InvalidRequest>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= maxBytes) return void chunks.push(chunk)
      stop()
      incoming.pause()
      resume(Effect.fail(payloadTooLarge(maxBytes)))
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    const onError = () => {
      stop()
      resume(Effect.fail(new InvalidRequest({ description: "The request body could not be read" })))
    }
    incoming.on("data", onData)
    incoming.on("end", onEnd)
    incoming.on("error", onError)
    return Effect.sync(stop)
  })
}
