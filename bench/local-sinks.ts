/**
 * The local ends `npm run bench`'s proxy scenarios talk to, in one process:
 * - the upstream both proxies call (PORT): reads every POST's body, parses it, and answers
 *   `{"ok":true,"echo":<body>}`, as a hosted service does its work on what it is sent (and as the
 *   shared yardstick's upstream does: one that skipped the parse would leave more of the machine to
 *   the proxies, and the proxy that does more per call would look better than it is);
 * - an OTLP/HTTP sink (PORT + 1): accepts every export (`POST /v1/traces`) with 200 `{}` and counts
 *   the bytes, so traced runs pay for building and sending their spans and nothing else.
 *
 *   PORT   npx tsx bench/local-sinks.ts
 */
import { createServer } from "node:http"

const port = Number(process.env.PORT)
const upstream = createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    let echo: unknown = null
    try {
      echo = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null")
    } catch {
      // answered with a null echo, as the yardstick's upstream does
    }
    const answer = JSON.stringify({ ok: true, echo })
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
    response.end(answer)
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
