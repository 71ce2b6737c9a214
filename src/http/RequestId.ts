/**
 * A request's id: 64 random bits in hex, made once per request on first use, and the same wherever
 * it is asked for (the debug log line, the `X-Request-Id` an upstream receives), whichever entry
 * answered. Keyed by the request's source object (node:http's IncomingMessage), which both the fast
 * lane and the app see. Random bytes are drawn in blocks: one system call per 512 requests.
 */
import { randomBytes } from "node:crypto"

const ID_BYTES = 8
// Not a server's state, so no layer owns them: an id is kept on its request object, which no two
// servers share and which takes it along when it goes (a property rather than a WeakMap entry, which
// the garbage collector must track for every short-lived request), and the block is random bytes not
// yet used, which nothing can tell apart.
const REQUEST_ID: unique symbol = Symbol("service-auth/requestId")
type Identified = { [REQUEST_ID]?: string }
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

export const requestIdOf = (source: unknown): string => {
  if (typeof source !== "object" || source === null) return freshId()
  const identified = source as Identified
  let id = identified[REQUEST_ID]
  if (id === undefined) {
    id = freshId()
    identified[REQUEST_ID] = id
  }
  return id
}
