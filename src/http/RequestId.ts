/**
 * A request's id: 64 random bits in hex, made once per request on first use, and the same wherever
 * it is asked for (the debug log line, the `X-Request-Id` an upstream receives), whichever entry
 * answered. Keyed by the request's source object (node:http's IncomingMessage), which both the fast
 * lane and the app see. Random bytes are drawn in blocks: one system call per 512 requests.
 */
import { randomBytes } from "node:crypto"

const ID_BYTES = 8
// Not a server's state, so no layer owns them: ids are keyed weakly by request objects, which no
// two servers share, and the block is random bytes not yet used, which nothing can tell apart.
const ids = new WeakMap<object, string>()
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
  let id = ids.get(source)
  if (id === undefined) {
    id = freshId()
    ids.set(source, id)
  }
  return id
}
