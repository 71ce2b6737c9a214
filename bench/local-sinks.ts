/**
 * The local ends `npm run bench`'s proxy scenarios talk to, in one process:
 * - the upstream both proxies call (PORT): answers every POST with a small JSON object, after
 *   reading the body;
 * - an OTLP/HTTP sink (PORT + 1): accepts every export (`POST /v1/traces`) with 200 `{}` and counts
 *   the bytes, so traced runs pay for building and sending their spans and nothing else.
 *
 *   PORT   npx tsx bench/local-sinks.ts
 */
import { createServer } from "node:http"

const port = Number(process.env.PORT)
const ANSWER = JSON.stringify({ ok: true, quote: { amount: 42, currency: "EUR" } })

const upstream = createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(ANSWER) })
    response.end(ANSWER)
  })
})

let exported = 0
const sink = createServer((request, response) => {
  request.on("data", (chunk: Buffer) => (exported += chunk.length))
  request.on("end", () => {
    response.writeHead(200, { "content-type": "application/json" })
    response.end("{}")
  })
})
process.on("SIGTERM", () => {
  console.log(`otlp sink received ${exported} bytes`)
  process.exit(0)
})

upstream.listen(port, "127.0.0.1", () =>
  sink.listen(port + 1, "127.0.0.1", () => console.log(`listening ${port}`)))
