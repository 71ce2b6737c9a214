/**
 * A TCP proxy on 127.0.0.1 (random port) in front of another TCP server, for simulating a database
 * outage without touching the shared database:
 *
 * - `cut()`: PostgreSQL stopped. Every open connection is reset, and new ones are reset as soon as
 *   they are accepted.
 * - `stall()`: a black hole (a partition, a hung server). Connections, open or new, are accepted
 *   and kept, but nothing is forwarded in either direction.
 * - `restore()`: the database is back. New connections are forwarded again; the connections that
 *   were black-holed are reset, as they would be once TCP gave up on them.
 * - `close()`: stops listening and destroys every connection.
 */
import { createConnection, createServer, type Socket } from "node:net"

export type ProxyMode = "forward" | "cut" | "stall"

export interface TcpProxy {
  readonly port: number
  readonly mode: () => ProxyMode
  /** Connections accepted so far (including refused and black-holed ones). */
  readonly accepted: () => number
  /** Connections currently open (client side). */
  readonly open: () => number
  readonly cut: () => void
  readonly stall: () => void
  readonly restore: () => void
  readonly close: () => Promise<void>
}

interface Pair {
  readonly client: Socket
  upstream: Socket | undefined
  /** Nothing is forwarded on a stalled pair, ever again. */
  stalled: boolean
}

const reset = (socket: Socket | undefined) => {
  if (socket === undefined || socket.destroyed) return
  // An RST, like a stopped server's kernel answers; fall back to a plain destroy.
  if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy()
  else socket.destroy()
}

export const startTcpProxy = (target: { readonly host: string; readonly port: number }): Promise<TcpProxy> =>
  new Promise((resolve, reject) => {
    let mode: ProxyMode = "forward"
    let accepted = 0
    const pairs = new Set<Pair>()

    const drop = (pair: Pair) => {
      pairs.delete(pair)
      reset(pair.client)
      reset(pair.upstream)
    }

    // No Nagle delays on either side, as a database connection has none: the proxy must not add
    // 40 ms stalls (Nagle meeting delayed ACKs) that the real network would not.
    const server = createServer({ pauseOnConnect: false, noDelay: true }, (client) => {
      accepted++
      const pair: Pair = { client, upstream: undefined, stalled: mode === "stall" }
      client.on("error", () => drop(pair))
      client.on("close", () => drop(pair))
      if (mode === "cut") {
        reset(client)
        return
      }
      pairs.add(pair)
      if (pair.stalled) {
        // Accept and read everything, answer nothing.
        client.on("data", () => {})
        return
      }
      const upstream = createConnection({ host: target.host, port: target.port, noDelay: true })
      pair.upstream = upstream
      upstream.on("error", () => drop(pair))
      upstream.on("close", () => drop(pair))
      client.on("data", (chunk) => {
        if (!pair.stalled) upstream.write(chunk)
      })
      upstream.on("data", (chunk) => {
        if (!pair.stalled) client.write(chunk)
      })
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address !== "object") return reject(new Error("the proxy has no TCP address"))
      server.off("error", reject)
      resolve({
        port: address.port,
        mode: () => mode,
        accepted: () => accepted,
        open: () => pairs.size,
        cut: () => {
          mode = "cut"
          for (const pair of [...pairs]) drop(pair)
        },
        stall: () => {
          mode = "stall"
          for (const pair of pairs) pair.stalled = true
        },
        restore: () => {
          mode = "forward"
          for (const pair of [...pairs]) if (pair.stalled) drop(pair)
        },
        close: () =>
          new Promise<void>((done) => {
            mode = "cut"
            for (const pair of [...pairs]) drop(pair)
            server.close(() => done())
          })
      })
    })
  })
