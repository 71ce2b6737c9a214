/**
 * The tracing process tests' helpers: an OTLP/HTTP receiver in the test (it keeps every POST, the
 * exports and a proxy's upstream calls alike), the spans of its JSON exports, and a real server
 * (`npm start`, embedded database) with a service, a credential, a token and a call.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { expect } from "vitest"
import { adminJson } from "./AdminFetch.js"

export const ROOT = fileURLToPath(new URL("../../", import.meta.url))
export const ADMIN_TOKEN = randomBytes(24).toString("base64url")
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every OTLP variable cleared, whatever the environment running the tests holds. */
export const NO_OTEL = Object.fromEntries(
  Object.keys(process.env).filter((name) => name.startsWith("OTEL_")).map((name) => [name, ""])
)

export interface Export {
  readonly path: string
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

/** An OTLP/HTTP receiver: keeps every POST, answers 200 in the request's own encoding. */
export const startReceiver = async () => {
  const exports: Array<Export> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      exports.push({ path: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks) })
      const json = request.headers["content-type"] === "application/json"
      response.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" })
      response.end(json ? "{}" : undefined)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    endpoint: `http://127.0.0.1:${port}`,
    exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>

export interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Record<string, unknown> }>
  readonly resource: Record<string, unknown>
}

type OtlpAttribute = { readonly key: string; readonly value: Record<string, unknown> }
const attributesOf = (list: ReadonlyArray<OtlpAttribute> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, Object.values(value)[0]]))

/** The spans of every JSON export received so far. */
export const spansOf = (receiver: Receiver): Array<Span> =>
  receiver.exports.filter((e) => e.path === "/v1/traces").flatMap((e) =>
    (JSON.parse(e.body.toString("utf8")).resourceSpans as Array<any>).flatMap((resourceSpans) =>
      (resourceSpans.scopeSpans as Array<any>).flatMap((scopeSpans) =>
        (scopeSpans.spans as Array<any>).map((span) => ({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId,
          name: span.name,
          kind: span.kind,
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((event: any) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
          resource: attributesOf(resourceSpans.resource?.attributes)
        }))
      )
    )
  )

export const waitFor = async <A>(what: string, check: () => A | undefined, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = check()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

const dirs: Array<string> = []
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "traces-"))
  dirs.push(dir)
  return join(dir, "data")
}
/** Removes the data directories and key files made so far (each test file's `afterAll`). */
export const removeTestDirs = () => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }))

/**
 * Every server here signs with this key: generating one on a fresh data directory takes longer than
 * the storage timeout allows when the machine is loaded, which is not what these tests are about.
 */
const SIGNING_KEY_FILE = (() => {
  const dir = mkdtempSync(join(tmpdir(), "traces-key-"))
  dirs.push(dir)
  const file = join(dir, "key.pem")
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  writeFileSync(file, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 })
  return file
})()

/** Settings every server here starts with. */
export const serverSettings = () => ({ ...NO_OTEL, ADMIN_TOKEN, SIGNING_KEY_FILE, DATA_DIR: dataDir() })

/** A service with a credential, a token for it (sent with `tokenHeaders`), and one call of it. */
export const tokenAndCall = async (base: string, tokenHeaders: Record<string, string> = {}, handler?: unknown) => {
  const admin = (method: string, path: string, body?: unknown) => adminJson(base, ADMIN_TOKEN, method, path, body)
  const profile = `tr-${randomBytes(4).toString("hex")}`
  await admin("PUT", `/admin/profiles/${profile}`)
  await admin("PUT", `/admin/profiles/${profile}/environments/prod`)
  const service = await admin("POST", `/admin/profiles/${profile}/environments/prod/services`, {
    auth_type: "oauth",
    ...(handler === undefined ? {} : { handler })
  })
  const credential = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${service.uuid}/credentials`)
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: credential.client_id,
    client_secret: credential.client_secret,
    profile,
    environment: "prod",
    service_uuid: service.uuid
  })
  // The secret in the query string too: the URL a span records must not hold it.
  const tokenResponse = await fetch(`${base}/oauth/token?client_secret=${credential.client_secret}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...tokenHeaders },
    body: form
  })
  expect(tokenResponse.status).toBe(200)
  const token = (await tokenResponse.json() as { access_token: string }).access_token
  const call = await fetch(`${base}/service/${profile}/prod/json/${service.uuid}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ amount: 42 })
  })
  expect(call.status).toBe(200)
  // The same request again: this time the cache answers.
  const again = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form
  })
  expect(again.status).toBe(200)
  return {
    profile,
    service,
    credential,
    form: form.toString(),
    token,
    again: (await again.json() as { access_token: string }).access_token
  }
}

