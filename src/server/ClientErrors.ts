/**
 * Requests Node's HTTP parser refuses before the app sees them (bytes outside the request-line
 * grammar, unknown methods, oversized headers, a request that did not arrive in time) still get
 * the contract's JSON error body.
 */
import type { Server } from "node:http"
import type { Duplex } from "node:stream"

const answer = (status: string, description: string, extraHeaders: string) => {
  const body = JSON.stringify({ error: "invalid_request", error_description: description })
  return `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${
    Buffer.byteLength(body)
  }\r\n${extraHeaders}connection: close\r\n\r\n${body}`
}

/** `headers`: sent with these answers too, as with every other (HSTS over TLS). */
export const answerClientErrors = (server: Server, headers: Readonly<Record<string, string>> = {}): void => {
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable) return void socket.destroy()
    if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      // HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS passed (`ConnectionLimits`): answered when no answer
      // has begun (the app may be waiting for the rest of the body), then the connection is closed.
      const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
      if (answering?.headersSent === true) return void socket.destroy()
      return void socket.end(
        answer("408 Request Timeout", "The request did not arrive in time", extra),
        () => socket.destroy()
      )
    }
    socket.end(
      error.code === "HPE_HEADER_OVERFLOW"
        ? answer("431 Request Header Fields Too Large", "Request headers are too large", extra)
        : answer("400 Bad Request", "The request is not valid HTTP", extra)
    )
  })
}
