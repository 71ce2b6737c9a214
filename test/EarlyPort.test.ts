/**
 * The port a start opens before its storage is ready (`EarlyPort`): `/healthz` answers at once with
 * the app's bytes; every other request waits, body unread, and is answered by the server that takes
 * the port over as if it had just arrived; a start that fails answers what it held with the
 * contract's 503 and closes the port. Real sockets, in process.
 */
import { request as httpRequest } from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import { adoptEarlyPort, closeEarlyPort, holdsEarlyPort, openEarlyPort } from "../src/http/EarlyPort.js"
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

afterEach(() => closeEarlyPort())

describe("the early port", () => {
  it("answers /healthz at once, holds the rest, and hands it to the server that takes the port over", async () => {
    const port = await freePort()
    expect(await openEarlyPort("127.0.0.1", port)).toBe(true)
    expect(holdsEarlyPort("127.0.0.1", port)).toBe(true)

    const health = await send(port, "GET", "/healthz?probe=1")
    expect(health.status).toBe(200)
    expect(health.headers["content-type"]).toBe("application/json")
    expect(health.body).toBe(`{"status":"ok"}`)

    const adopted = adoptEarlyPort("127.0.0.1", port)!
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
    expect(holdsEarlyPort("127.0.0.1", port)).toBe(false)
    await new Promise((resolve) => adopted.server.close(resolve))
  })

  it("a start that fails answers what it held with 503 temporarily_unavailable and Retry-After, then closes", async () => {
    const port = await freePort()
    expect(await openEarlyPort("127.0.0.1", port)).toBe(true)
    const adopted = adoptEarlyPort("127.0.0.1", port)!
    const arrived = new Promise<void>((resolve) => adopted.server.once("request", () => resolve()))
    const held = send(port, "GET", "/readyz")
    await arrived

    await closeEarlyPort()
    const answer = await held
    expect(answer.status).toBe(503)
    expect(answer.headers["retry-after"]).toBe("1")
    expect(JSON.parse(answer.body)).toEqual({
      error: "temporarily_unavailable",
      error_description: "The server is starting; retry shortly"
    })
    await expect(send(port, "GET", "/healthz")).rejects.toThrow()
  })

  it("a port already taken is not opened (the server's own listen then says why)", async () => {
    const port = await freePort()
    expect(await openEarlyPort("127.0.0.1", port)).toBe(true)
    const first = adoptEarlyPort("127.0.0.1", port)!
    first.takeOver(() => {})
    expect(await openEarlyPort("127.0.0.1", port)).toBe(false)
    expect(holdsEarlyPort("127.0.0.1", port)).toBe(false)
    await new Promise((resolve) => first.server.close(resolve))
  })
})
