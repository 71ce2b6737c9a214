/**
 * The upstream both proxies of `npm run bench`'s proxy scenarios call: reads every POST's body,
 * parses it, and answers `{"ok":true,"echo":<body>}`, as a hosted service does its work on what it
 * is sent (one that skipped the parse would leave more of the machine to the proxies, and the proxy
 * that does more per call would look better than it is). It runs alone in its process: the OTLP sink
 * is another (`otlp-sink.ts`), so that exported spans do not slow the upstream of one side only.
 *
 *   PORT   npx tsx bench/upstream-server.ts
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
      // answered with a null echo
    }
    const answer = JSON.stringify({ ok: true, echo })
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
    response.end(answer)
  })
})
upstream.keepAliveTimeout = 65_000
process.on("SIGTERM", () => process.exit(0))
upstream.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
