/**
 * The secret hygiene run's harness: the real server (`npm start`) at LOG_LEVEL=debug on the embedded
 * database in a fresh directory, with a signing key generated here (PKCS#8 PEM), and every secret
 * the run uses or submits remembered, so that no answer (`call`) and, at the end, no log line may
 * contain one.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expect } from "vitest"
import { type ServerProcess, startServer } from "./ServerProcess.js"

/** A value that looks like a secret, unique to this run. */
export const secretLooking = (label: string) => `S3CRET-${label}-${randomBytes(12).toString("hex")}`

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly body: any
}

export const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()
export const formHeaders = { "content-type": "application/x-www-form-urlencoded" }
export const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`

/** Asserts the exact error body and that it does not contain `submitted`. */
export const expectError = (answer: Answer, status: number, error: string, submitted: ReadonlyArray<string> = []) => {
  expect({ status: answer.status, body: answer.body }, answer.text).toEqual({
    status,
    body: { error, error_description: expect.any(String) }
  })
  for (const value of submitted) expect(answer.text, `the error body echoes ${value}`).not.toContain(value)
}

/** A run: its admin token and signing key, the secrets known so far, the server once started. */
export const hygieneRun = () => {
  const ADMIN_TOKEN = `adm-${randomBytes(24).toString("base64url")}`
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  const PRIVATE_KEY_PEM = privateKey.export({ type: "pkcs8", format: "pem" }).toString()
  /** The PEM's base64 body, one string. */
  const PRIVATE_KEY_BASE64 = PRIVATE_KEY_PEM.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")
  let dir: string | undefined
  let server: ServerProcess | undefined

  /** Every secret the log must not contain, with a label for the failure message. */
  const secrets = new Map<string, string>()
  const remember = (label: string, value: string) => {
    if (value.length < 16) throw new Error(`${label} is too short to search for: ${value.length} characters`)
    secrets.set(value, label)
  }
  remember("admin token", ADMIN_TOKEN)
  // Every 64-character line of the key, and the whole body.
  for (let i = 0; i + 64 <= PRIVATE_KEY_BASE64.length; i += 64) {
    remember(`private key base64 [${i}..${i + 64}]`, PRIVATE_KEY_BASE64.slice(i, i + 64))
  }
  remember("private key base64 (all)", PRIVATE_KEY_BASE64)

  /**
   * One request. Unless `mayReveal` names the secret-bearing answer it is (a new credential, a
   * token), the answer must not contain any secret known so far.
   */
  const call = async (
    method: string,
    path: string,
    options: { body?: string; headers?: Record<string, string>; mayReveal?: "credential" | "token" } = {}
  ): Promise<Answer> => {
    const response = await fetch(`${server!.base}${path}`, {
      method,
      headers: options.headers ?? {},
      ...(options.body === undefined ? {} : { body: options.body })
    })
    const text = await response.text()
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    if (options.mayReveal === undefined) {
      for (const [value, label] of secrets) {
        expect(text.includes(value), `${method} ${path} → ${response.status} echoes the ${label}: ${text.slice(0, 300)}`).toBe(false)
      }
    }
    return { status: response.status, headers: response.headers, text, body }
  }

  const admin = (method: string, path: string, body?: unknown, token = ADMIN_TOKEN) =>
    call(method, path, {
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })

  const start = async () => {
    dir = mkdtempSync(join(tmpdir(), "secret-hygiene-"))
    const keyFile = join(dir, "signing-key.pem")
    writeFileSync(keyFile, PRIVATE_KEY_PEM, { mode: 0o600 })
    server = await startServer({
      LOG_LEVEL: "debug",
      ADMIN_TOKEN,
      DATA_DIR: join(dir, "data"),
      SIGNING_KEY_FILE: keyFile,
      DATABASE_URL: ""
    })
  }
  const stop = async () => {
    await server?.stop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }
  return { ADMIN_TOKEN, secrets, remember, call, admin, start, stop, server: () => server }
}
