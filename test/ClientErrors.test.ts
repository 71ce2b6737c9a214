/**
 * What Node's HTTP parser refuses before the app sees it still gets the contract's JSON error body
 * from the real server (`npm start`'s server; the in-process test server is built differently).
 */
import { mkdtemp, rm } from "node:fs/promises"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const raw = (port: number, bytes: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.end(Buffer.from(bytes, "latin1")))
    let answer = ""
    socket.setEncoding("latin1")
    socket.on("data", (chunk) => (answer += chunk))
    socket.on("close", () => resolve(answer))
    socket.on("error", reject)
    socket.setTimeout(5_000, () => socket.destroy(new Error("no answer within 5 s")))
  })

const parse = (answer: string) => {
  const [head, body] = answer.split("\r\n\r\n")
  return { statusLine: head!.split("\r\n")[0], head: head!.toLowerCase(), body: JSON.parse(body!) }
}

describe("requests Node's HTTP parser refuses (real server)", () => {
  let server: ServerProcess
  let dataDir: string

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "service-auth-client-errors-"))
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN: "x".repeat(32), DATABASE_URL: "" })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await rm(dataDir, { recursive: true, force: true })
  })

  it.each([
    ["raw non-ASCII byte in the request line", "GET /admin/profiles/\xff HTTP/1.1\r\nHost: x\r\n\r\n"],
    ["an unknown method", "CONNECTX /healthz HTTP/1.1\r\nHost: x\r\n\r\n"],
    ["not HTTP at all", "\x00\x01\x02 hello\r\n\r\n"]
  ])("%s → 400 with the JSON error body", async (_, bytes) => {
    const answer = parse(await raw(server.port, bytes))
    expect(answer.statusLine).toBe("HTTP/1.1 400 Bad Request")
    expect(answer.head).toContain("content-type: application/json")
    expect(answer.body).toEqual({ error: "invalid_request", error_description: "The request is not valid HTTP" })
  })

  it("headers over 16 KiB → 431 with the JSON error body", async () => {
    const answer = parse(await raw(server.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`))
    expect(answer.statusLine).toBe("HTTP/1.1 431 Request Header Fields Too Large")
    expect(answer.body).toEqual({ error: "invalid_request", error_description: "Request headers are too large" })
  })

  it("keeps serving afterwards", async () => {
    expect((await fetch(`${server.base}/healthz`)).status).toBe(200)
  })
})
