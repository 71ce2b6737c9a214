/**
 * Native TLS (TLS_CERT_FILE, TLS_KEY_FILE; docs/operators.md): the real server speaking HTTPS
 * with certificates for localhost made here by the `openssl` command, checked by a client that
 * trusts only them.
 *
 * One server goes through it all in order: a token over HTTPS, the metadata's https endpoints, HSTS
 * on every kind of answer, no plaintext on the port; a certificate replaced while a keep-alive
 * connection stays open (new connections get the new one within 10 s, the open one carries on); a
 * mismatched pair refused with a log line while the previous one is served; SIGHUP re-reading the
 * files. Then starts that must fail, with one line each.
 */
import { execFileSync } from "node:child_process"
import { randomBytes, X509Certificate } from "node:crypto"
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { Agent, request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect as tlsConnect, type TLSSocket } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runToExit, type ServerProcess, startServer } from "./support/ServerProcess.js"
import { fixtureOf } from "../src/testing.js"

const ADMIN_TOKEN = randomBytes(24).toString("base64url")
const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL
const HSTS = "max-age=31536000"

const dir = mkdtempSync(join(tmpdir(), "native-tls-"))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Pair {
  readonly cert: string
  readonly key: string
  readonly fingerprint: string
}

/** A self-signed certificate for localhost (and 127.0.0.1) with its key, by the openssl command. */
const makePair = (): Pair => {
  const name = randomBytes(4).toString("hex")
  const [certFile, keyFile] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)]
  execFileSync("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=localhost",
    "-addext",
    "subjectAltName=DNS:localhost,IP:127.0.0.1",
    "-keyout",
    keyFile,
    "-out",
    certFile
  ], { stdio: "ignore" })
  const cert = readFileSync(certFile, "utf8")
  return { cert, key: readFileSync(keyFile, "utf8"), fingerprint: new X509Certificate(cert).fingerprint256 }
}

const [first, second, third, fourth] = [makePair(), makePair(), makePair(), makePair()]
/** The client trusts exactly these (each is its own issuer). */
const CA = [first, second, third, fourth].map((pair) => pair.cert).join("")
const CERT_FILE = join(dir, "server.crt")
const KEY_FILE = join(dir, "server.key")

/** Replaces a file the way deployment tools do: written beside it, then renamed over it. */
const replace = (path: string, text: string) => {
  writeFileSync(`${path}.new`, text)
  renameSync(`${path}.new`, path)
}

const install = (cert: string, key: string) => {
  replace(KEY_FILE, key)
  replace(CERT_FILE, cert)
}

interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly body: any
  /** The SHA-256 fingerprint of the certificate the server presented on this connection. */
  readonly fingerprint: string
  readonly reusedSocket: boolean
}

let server: ServerProcess

/** One HTTPS request, checked against `CA` for the name localhost; on its own connection unless an agent is given. */
const send = (
  method: string,
  path: string,
  options: { readonly headers?: Record<string, string>; readonly body?: string; readonly agent?: Agent } = {}
) =>
  new Promise<Answer>((resolve, reject) => {
    const request = httpsRequest({
      host: "127.0.0.1",
      port: server.port,
      servername: "localhost",
      ca: CA,
      method,
      path,
      headers: options.headers,
      agent: options.agent ?? false,
      timeout: 10_000
    }, (response) => {
      // Read now: a keep-alive agent takes the socket back once the answer has ended.
      const fingerprint = (response.socket as TLSSocket).getPeerCertificate().fingerprint256
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch { /* not JSON */ }
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body,
          fingerprint,
          reusedSocket: request.reusedSocket
        })
      })
    })
    request.once("timeout", () => request.destroy(new Error("no answer within 10 s")))
    request.once("error", reject)
    request.end(options.body)
  })

const admin = (method: string, path: string, body?: unknown) =>
  send(method, path, {
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

/** Waits for `condition` (checked every 250 ms) until the deadline; the last value it saw. */
const waitFor = async <A>(deadlineMs: number, check: () => Promise<A>, condition: (value: A) => boolean) => {
  const deadline = Date.now() + deadlineMs
  let value = await check()
  while (!condition(value) && Date.now() < deadline) {
    await sleep(250)
    value = await check()
  }
  return value
}

beforeAll(async () => {
  install(first.cert, first.key)
  const storage = DATABASE_URL === undefined ? { DATA_DIR: join(dir, "data") } : { DATABASE_URL }
  server = await startServer(
    { ADMIN_TOKEN, ...storage, TLS_CERT_FILE: CERT_FILE, TLS_KEY_FILE: KEY_FILE, LOG_LEVEL: "info" },
    { tlsCa: CA, healthTimeoutMs: 150_000 }
  )
}, 180_000)

afterAll(async () => {
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe("HTTPS on PORT (TLS_CERT_FILE, TLS_KEY_FILE)", () => {
  it("issues a token over HTTPS; the default issuer and the metadata's endpoints are https://localhost:$PORT", async () => {
    expect(server.base.startsWith("https://")).toBe(true)
    expect(server.log()).toContain(`service-auth listening on https://127.0.0.1:${server.port}`)
    const metadata = await send("GET", "/.well-known/oauth-authorization-server")
    expect(metadata.status).toBe(200)
    expect(metadata.fingerprint).toBe(first.fingerprint)
    const issuer = `https://localhost:${server.port}`
    expect(metadata.body).toMatchObject({
      issuer,
      token_endpoint: `${issuer}/oauth/token`,
      jwks_uri: `${issuer}/.well-known/jwks.json`
    })

    const profile = `tls-${randomBytes(4).toString("hex")}`
    expect((await admin("PUT", `/admin/profiles/${profile}`)).status).toBe(201)
    expect((await admin("PUT", `/admin/profiles/${profile}/environments/prod`)).status).toBe(201)
    const service = await admin("POST", `/admin/profiles/${profile}/environments/prod/services`, { auth_type: "oauth" })
    expect(service.status).toBe(201)
    const uuid = service.body.uuid as string
    const credential = await admin("POST", `/admin/profiles/${profile}/environments/prod/services/${uuid}/credentials`)
    expect(credential.status).toBe(201)
    const { tokenFields } = fixtureOf({ profile, environment: "prod", uuid }, credential.body)
    const form = (secret: string) => ({
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ ...tokenFields, client_secret: secret }).toString()
    })
    const issued = await send("POST", "/oauth/token", form(credential.body.client_secret))
    expect(issued.status).toBe(200)
    const claims = JSON.parse(Buffer.from(String(issued.body.access_token).split(".")[1]!, "base64url").toString())
    expect(claims.iss).toBe(issuer)
    expect(claims.aud).toBe(`${issuer}/service/${profile}/prod/json/${uuid}`)
    const call = await send("POST", `/service/${profile}/prod/json/${uuid}`, {
      headers: { authorization: `Bearer ${issued.body.access_token}`, "content-type": "application/json" },
      body: "{}"
    })
    expect(call.status).toBe(200)

    // HSTS on every answer: the fast lane's, the app's successes and errors, and the discovery's.
    // Now that last_used_at is recorded, the fast lane answers the same request from memory.
    const again = await send("POST", "/oauth/token", form(credential.body.client_secret))
    expect(again.status).toBe(200)
    const refused = await send("POST", "/oauth/token", form("wrong-secret"))
    expect(refused.status).toBe(401)
    for (
      const answer of [metadata, issued, again, call, refused, credential, await send("GET", "/healthz"), await send("GET", "/nowhere")]
    ) {
      expect(answer.headers["strict-transport-security"]).toBe(HSTS)
    }
  })

  it("HSTS also on the answer to a request Node's parser refuses", async () => {
    const text = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: "127.0.0.1", port: server.port, servername: "localhost", ca: CA }, () => {
        socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n")
      })
      let received = ""
      socket.on("data", (chunk: Buffer) => (received += chunk.toString()))
      socket.once("end", () => resolve(received))
      socket.once("error", reject)
      socket.setTimeout(10_000, () => socket.destroy(new Error("no answer")))
    })
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
    expect(text.toLowerCase()).toContain(`strict-transport-security: ${HSTS}\r\n`)
  })

  it("no plaintext on the port", async () => {
    await expect(fetch(`http://127.0.0.1:${server.port}/healthz`, { signal: AbortSignal.timeout(10_000) })).rejects.toThrow()
  })

  it("a replaced certificate reaches new connections within 10 s; a keep-alive connection opened before stays open", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const before = await send("GET", "/healthz", { agent })
      expect(before.fingerprint).toBe(first.fingerprint)
      install(second.cert, second.key)
      const fresh = await waitFor(10_000, async () => {
        // The open connection keeps answering with the certificate it was opened with.
        const kept = await send("GET", "/healthz", { agent })
        expect({ status: kept.status, reused: kept.reusedSocket, fingerprint: kept.fingerprint }).toEqual({
          status: 200,
          reused: true,
          fingerprint: first.fingerprint
        })
        return send("GET", "/healthz")
      }, (answer) => answer.fingerprint === second.fingerprint)
      expect(fresh.fingerprint).toBe(second.fingerprint)
      const kept = await send("GET", "/healthz", { agent })
      expect([kept.status, kept.reusedSocket, kept.fingerprint]).toEqual([200, true, first.fingerprint])
      expect(server.log()).toContain(`TLS certificate reloaded from ${CERT_FILE}`)
    } finally {
      agent.destroy()
    }
  })

  it("a new pair that does not match is refused with a log line and the previous certificate stays; a good one then goes in", async () => {
    install(third.cert, first.key)
    const line = await waitFor(10_000, async () => server.log(), (log) => log.includes("TLS certificate not replaced"))
    expect(line).toContain(
      `TLS certificate not replaced, still serving the previous one: TLS_CERT_FILE ${CERT_FILE} and TLS_KEY_FILE ${KEY_FILE} do not match`
    )
    expect(line).not.toContain("PRIVATE KEY")
    const still = await send("GET", "/healthz")
    expect([still.status, still.fingerprint]).toEqual([200, second.fingerprint])

    install(third.cert, third.key)
    const fresh = await waitFor(10_000, () => send("GET", "/healthz"), (answer) => answer.fingerprint === third.fingerprint)
    expect(fresh.fingerprint).toBe(third.fingerprint)
  })

  it("SIGHUP re-reads the files at once and the server goes on", async () => {
    const reloads = () => server.log().split(`TLS certificate reloaded from ${CERT_FILE}`).length - 1
    const count = reloads()
    process.kill(server.serverPid(), "SIGHUP")
    expect(await waitFor(10_000, async () => reloads(), (n) => n > count)).toBe(count + 1)
    const answer = await send("GET", "/healthz")
    expect([answer.status, answer.fingerprint]).toEqual([200, third.fingerprint])
  })
})

describe("TLS files that cannot be used stop the start with one line", () => {
  it("unreadable, mismatched, not PEM, or only one of the two", async () => {
    const garbage = join(dir, "garbage.pem")
    writeFileSync(garbage, "not a key\n")
    const [certFile, keyFile] = [join(dir, "fourth.crt"), join(dir, "fourth.key")]
    writeFileSync(certFile, fourth.cert)
    writeFileSync(keyFile, fourth.key)
    const missing = join(dir, "missing.crt")
    const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
      [{ TLS_CERT_FILE: missing, TLS_KEY_FILE: keyFile }, `cannot read TLS_CERT_FILE ${missing}: no such file or directory`],
      [
        { TLS_CERT_FILE: certFile, TLS_KEY_FILE: KEY_FILE.replace("server", "absent") },
        `cannot read TLS_KEY_FILE ${KEY_FILE.replace("server", "absent")}: no such file or directory`
      ],
      [
        { TLS_CERT_FILE: certFile, TLS_KEY_FILE: join(dir, "server.key") },
        `TLS_CERT_FILE ${certFile} and TLS_KEY_FILE ${join(dir, "server.key")} do not match (the certificate is for another key)`
      ],
      [{ TLS_CERT_FILE: garbage, TLS_KEY_FILE: keyFile }, `TLS_CERT_FILE ${garbage} holds no PEM certificate`],
      [{ TLS_CERT_FILE: certFile, TLS_KEY_FILE: garbage }, `TLS_KEY_FILE ${garbage} holds no unencrypted PEM private key`],
      [
        { TLS_CERT_FILE: certFile },
        "invalid setting: TLS_CERT_FILE and TLS_KEY_FILE must be set together (the certificate and its private key, PEM)"
      ]
    ]
    const outcomes = await Promise.all(
      cases.map(([env]) => runToExit({ ADMIN_TOKEN, DATA_DIR: join(dir, `refused-${randomBytes(4).toString("hex")}`), ...env }, 60_000))
    )
    outcomes.forEach(({ code, output }, i) => {
      expect(code, output).toBe(1)
      expect(output.trim().split("\n")).toEqual([`service-auth could not start: ${cases[i]![1]}`])
    })
  }, 120_000)
})
