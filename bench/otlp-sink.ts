/**
 * The OTLP/HTTP sink of `npm run bench`'s traced proxy scenarios: accepts every export
 * (`POST /v1/traces`) with 200 `{}` and counts the bytes, so traced runs pay for building and
 * sending their spans and nothing else.
 *
 *   PORT   npx tsx bench/otlp-sink.ts
 */
import { createServer } from "node:http"

const port = Number(process.env.PORT)
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
sink.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
