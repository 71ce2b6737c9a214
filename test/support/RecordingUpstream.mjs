// An upstream for the gateway tests, run as its own process: it records every request it receives
// (headers and body) and answers as told. Calls go to /svc/{key}; what a key answers is set with
// PUT /__mode/{key} {"status","body","text","retryAfter","hold","drop"}; GET /__received/{key}
// answers what that key received; GET /__held/{key} how many calls are being held; POST
// /__release/{key} answers them (a call whose connection closed is no longer held). Prints its port on the first line of stdout.
import { createServer } from "node:http"

const modes = new Map()
const received = new Map()
const held = new Map()

const json = (response, status, value, headers = {}) => {
  const text = JSON.stringify(value)
  response.writeHead(status, { "content-type": "application/json", ...headers })
  response.end(text)
}

const answer = (key, response, mode) => {
  if (mode.drop) return response.socket.destroy()
  const headers = mode.retryAfter === undefined ? {} : { "retry-after": mode.retryAfter }
  if (mode.text !== undefined) {
    response.writeHead(mode.status ?? 200, { "content-type": "application/json", ...headers })
    return response.end(mode.text)
  }
  json(response, mode.status ?? 200, mode.body ?? { ok: true, key }, headers)
}

const server = createServer((request, response) => {
  const chunks = []
  request.on("data", (chunk) => chunks.push(chunk))
  request.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8")
    const [, kind, key = ""] = (request.url ?? "").split("?")[0].split("/")
    if (kind === "__mode") {
      modes.set(key, JSON.parse(body))
      return json(response, 200, {})
    }
    if (kind === "__received") return json(response, 200, received.get(key) ?? [])
    if (kind === "__held") return json(response, 200, { held: (held.get(key) ?? []).length })
    if (kind === "__release") {
      const waiting = held.get(key) ?? []
      held.delete(key)
      for (const release of waiting) release()
      return json(response, 200, { released: waiting.length })
    }
    const list = received.get(key) ?? []
    list.push({ method: request.method, url: request.url, headers: request.headers, body })
    received.set(key, list)
    const mode = modes.get(key) ?? {}
    if (mode.hold) {
      const waiting = held.get(key) ?? []
      const release = () => answer(key, response, { ...mode, hold: false })
      waiting.push(release)
      held.set(key, waiting)
      // A call the gateway gave up on (its caller left) is no longer held.
      response.once("close", () => {
        const still = held.get(key) ?? []
        if (still.includes(release)) still.splice(still.indexOf(release), 1)
      })
      return
    }
    answer(key, response, mode)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => process.stdout.write(`${server.address().port}\n`))
process.on("SIGTERM", () => process.exit(0))
