/**
 * A request's id: 64 random bits in hex, made once per request on first use, and the same wherever
 * it is asked for (the debug log line, the `X-Request-Id` an upstream receives), whichever entry
 * answered. Kept on the request's source object (node:http's IncomingMessage), which both the fast
 * lane and the app see, and which takes it along when it goes (a property rather than a WeakMap
 * entry, which the garbage collector must track for every short-lived request). The random bytes
 * are the server's (`RequestIds`), drawn in blocks: one system call per 512 requests.
 */
import { Context, Layer } from "effect"
import { randomBytes } from "node:crypto"

const ID_BYTES = 8
const REQUEST_ID: unique symbol = Symbol("service-auth/requestId")
type Identified = { [REQUEST_ID]?: string }

/** The id of the request whose source object is given (a fresh one for anything else). */
export type RequestIdOf = (source: unknown) => string

/** A source of request ids with a block of random bytes of its own. */
export const makeRequestIds = (): RequestIdOf => {
  let block: Buffer = Buffer.alloc(0)
  let offset = 0
  const freshId = (): string => {
    if (offset + ID_BYTES > block.length) {
      block = randomBytes(ID_BYTES * 512)
      offset = 0
    }
    const id = block.toString("hex", offset, offset + ID_BYTES)
    offset += ID_BYTES
    return id
  }
  return (source) => {
    if (typeof source !== "object" || source === null) return freshId()
    const identified = source as Identified
    let id = identified[REQUEST_ID]
    if (id === undefined) {
      id = freshId()
      identified[REQUEST_ID] = id
    }
    return id
  }
}

/** The server's request ids: one block of random bytes per server, gone with it. */
export class RequestIds extends Context.Tag("service-auth/RequestIds")<RequestIds, RequestIdOf>() {
  static readonly layer = Layer.sync(RequestIds, makeRequestIds)
}
