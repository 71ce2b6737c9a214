/**
 * The tracing process tests' helpers: an OTLP/HTTP receiver in the test (it keeps every POST, the
 * exports and a proxy's upstream calls alike), the spans of its JSON exports, and a real server
 * (`npm start`, embedded database) with a service, a credential, a token and a call.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { expect } from "vitest"
import { adminJson } from "./AdminFetch.js"
import { type OtlpSink, startOtlpSink } from "./OtlpSink.js"

export const ROOT = fileURLToPath(new URL("../../", import.meta.url))
export const ADMIN_TOKEN = randomBytes(24).toString("base64url")
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every OTLP variable cleared, whatever the environment running the tests holds. */
export const NO_OTEL = Object.fromEntries(
  Object.keys(process.env).filter((name) => name.startsWith("OTEL_")).map((name) => [name, ""])
)

/** The OTLP/HTTP receiver of these tests: the one sink every tracing test reads spans from. */
export type Receiver = OtlpSink
export const startReceiver = startOtlpSink
export const spansOf = (receiver: Receiver) => receiver.spans()

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
