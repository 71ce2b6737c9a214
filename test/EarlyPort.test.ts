/**
 * The port a start opens before its storage is ready (`EarlyPort`): `/healthz` answers at once with
 * the app's bytes; every other request waits, body unread, and is answered by the server that takes
 * the port over as if it had just arrived; a start that fails answers what it held with the
 * contract's 503 and closes the port. Real sockets, in process.
 */
import { request as httpRequest } from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import { SERVICE_VERSION } from "../src/config/Version.js"
import { type EarlyPort, openEarlyPort } from "../src/server/EarlyPort.js"
import { freePort } from "../src/testing.js"

interface Answered {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: string
}

const send = (port: number, method: string, path: string, body?: string) =>
  new Promise<Answered>((resolve, reject) => {
    const request = httpRequest({ host: "127.0.0.1", port, method, path, agent: false }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }))
    })
    request.on("error", reject)
    request.end(body)
  })

const opened: Array<EarlyPort> = []
const open = async (port: number) => {
  const early = await openEarlyPort("127.0.0.1", port)
  if (early !== undefined) opened.push(early)
  return early
}
afterEach(() => Promise.all(opened.splice(0).map((early) => early.close())))

describe("the early port", () => {
  it("answers /healthz at once, holds the rest, and hands it to the server that takes the port over", async () => {
    const port = await freePort()
    const adopted = (await open(port))!
    expect([adopted.host, adopted.port]).toEqual(["127.0.0.1", port])

    const health = await send(port, "GET", "/healthz?probe=1")
    expect(health.status).toBe(200)
    expect(health.headers["content-type"]).toBe("application/json")
    expect(health.body).toBe(JSON.stringify({ status: "ok", version: SERVICE_VERSION }))

    const arrived = new Promise<void>((resolve) => adopted.server.once("request", () => resolve()))
    const held = send(port, "POST", "/oauth/token", "grant_type=client_credentials")
    await arrived

    adopted.takeOver(() =>
      adopted.server.on("request", (request, response) => {
        let body = ""
        request.setEncoding("utf8")
        request.on("data", (chunk: string) => (body += chunk))
        request.on("end", () => response.end(`${request.method} ${request.url} ${body}`))
      })
    )
    expect((await held).body).toBe("POST /oauth/token grant_type=client_credentials")
    // Taken over: later requests, /healthz included, are the server's own.
    expect((await send(port, "GET", "/healthz")).body).toBe("GET /healthz ")
    // Closing a port taken over does nothing: it is the server's to drain.
    await adopted.close()
    expect((await send(port, "GET", "/healthz")).body).toBe("GET /healthz ")
    await new Promise((resolve) => adopted.server.close(resolve))
  })

  it("a start that fails answers what it held with 503 temporarily_unavailable and Retry-After, then closes", async () => {
    const port = await freePort()
    const adopted = (await open(port))!
    const arrived = new Promise<void>((resolve) => adopted.server.once("request", () => resolve()))
    const held = send(port, "GET", "/readyz")
    await arrived

    await adopted.close()
    const answer = await held
    expect(answer.status).toBe(503)
    expect(answer.headers["retry-after"]).toBe("1")
    expect(JSON.parse(answer.body)).toEqual({
      error: "temporarily_unavailable",
      error_description: "The server is starting; retry shortly"
    })
    await expect(send(port, "GET", "/healthz")).rejects.toThrow()
  })

  it("two ports open at once are independent: closing one leaves the other answering", async () => {
    const [a, b] = [(await open(await freePort()))!, (await open(await freePort()))!]
    await a.close()
    await expect(send(a.port, "GET", "/healthz")).rejects.toThrow()
    expect((await send(b.port, "GET", "/healthz")).status).toBe(200)
  })

  it("a port already taken is not opened (the server's own listen then says why)", async () => {
    const port = await freePort()
    const first = (await open(port))!
    first.takeOver(() => {})
    expect(await open(port)).toBeUndefined()
    await new Promise((resolve) => first.server.close(resolve))
  })
})
