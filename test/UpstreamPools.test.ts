/**
 * The proxy's upstream connections belong to the server that opened them (`UpstreamGateway`'s
 * layer): kept alive while it runs, closed when it stops, and never shared with another server
 * built later in the same process, as an embedding program may do.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { createServer, type Server } from "node:http"
import type { Socket } from "node:net"
import { createFixture, issueToken, makeTestServer } from "../src/testing.js"
import { callPath, callService } from "./support/Tokens.js"

let upstream: Server
let url = ""
const open = new Set<Socket>()
let connections = 0

beforeAll(async () => {
  upstream = createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ ok: true }))
    })
  })
  upstream.keepAliveTimeout = 60_000
  upstream.on("connection", (socket: Socket) => {
    connections++
    open.add(socket)
    socket.once("close", () => open.delete(socket))
  })
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
  const address = upstream.address()
  url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/svc`
})
afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())))

/** Waits (without a fixed sleep) until `check` holds. */
const eventually = (check: () => boolean) =>
  Effect.promise(async () => {
    for (let attempt = 0; attempt < 400 && !check(); attempt++) await new Promise((resolve) => setTimeout(resolve, 25))
    return check()
  })

/** A server built and stopped within this effect: two proxied calls through it, on one kept-alive connection. */
const oneServer = Effect.scoped(Effect.gen(function*() {
  const server = yield* Layer.build(makeTestServer())
  yield* Effect.gen(function*() {
    const fixture = yield* createFixture({ handler: { type: "proxy", url } })
    const token = yield* issueToken(fixture)
    for (let call = 0; call < 2; call++) expect((yield* callService(callPath(fixture), { token })).status).toBe(200)
  }).pipe(Effect.provide(server))
  // While the server runs, its pool keeps the connection for the next call.
  expect(open.size).toBe(1)
}))

describe("upstream connections", () => {
  it.effect(
    "are the server's: kept while it runs, closed when it stops, never reused by the next server in the process",
    () =>
      Effect.gen(function*() {
        yield* oneServer
        expect(yield* eventually(() => open.size === 0)).toBe(true)
        expect(connections).toBe(1)
        yield* oneServer
        // The second server opened its own connection: nothing of the first's pool survived.
        expect(connections).toBe(2)
        expect(yield* eventually(() => open.size === 0)).toBe(true)
      }),
    120_000
  )
})
