/**
 * `writeAnswer` hands node:http its headers as a flat array (faster than an object): the bytes on
 * the wire must be exactly those of the object form it replaced, `{ ...headers, "content-type",
 * "content-length" }`, for every kind of answer the hot endpoints give (the Date line aside).
 */
import { describe, expect, it } from "@effect/vitest"
import { createServer, type ServerResponse } from "node:http"
import { connect } from "node:net"
import type { AddressInfo } from "node:net"
import { writeAnswer } from "../src/server/WriteAnswer.js"
import { type Answer } from "../src/domain/Answer.js"

/** The object form `writeAnswer` wrote before. */
const writeAsObject = (response: ServerResponse, answer: Answer) => {
  const text = JSON.stringify(answer.body)
  response.writeHead(answer.status, {
    ...answer.headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text)
  })
  response.end(text)
}

const answers: ReadonlyArray<Answer> = [
  { status: 200, headers: { "cache-control": "no-store" }, body: { echo: "é ✓", n: 1 } },
  { status: 200, headers: { "cache-control": "no-store", pragma: "no-cache" }, body: { access_token: "a.b.c", expires_in: 3600 } },
  { status: 401, headers: { "cache-control": "no-store", "www-authenticate": `Basic realm="oauth"` }, body: { error: "invalid_client" } },
  { status: 429, headers: { "retry-after": "30", "cache-control": "no-store" }, body: { error: "too_many_attempts" } },
  { status: 503, headers: { "retry-after": "1" }, body: { error: "temporarily_unavailable" } },
  { status: 502, headers: {}, body: { error: "bad_gateway" } },
  // Headers that the object form would have overwritten in place keep their place and get its value.
  { status: 200, headers: { "content-type": "text/plain", "x-a": "1", "content-length": "999" }, body: {} }
]

/** The raw response to one request, its Date line removed. */
const rawAnswer = (port: number, path: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1")
    let raw = ""
    socket.on("data", (chunk) => (raw += chunk.toString("latin1")))
    socket.on("end", () => resolve(raw.replace(/\r\nDate: [^\r]*/, "")))
    socket.on("error", reject)
    socket.end(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  })

describe("writeAnswer", () => {
  it("writes the same bytes as the object form, for every kind of answer", async () => {
    const server = createServer((request, response) => {
      const [, form, index] = request.url!.split("/")
      const answer = answers[Number(index)]!
      if (form === "array") writeAnswer(response, answer)
      else writeAsObject(response, answer)
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    try {
      for (const [index, answer] of answers.entries()) {
        const written = await rawAnswer(port, `/array/${index}`)
        expect(written, JSON.stringify(answer.headers)).toBe(await rawAnswer(port, `/object/${index}`))
        expect(written).toContain(`HTTP/1.1 ${answer.status} `)
      }
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
