/**
 * The API reference at `GET /docs` over HTTP (docs/contract.md §4): a small page under a strict
 * Content-Security-Policy that names no other host, configuring Scalar without inline script, and
 * Scalar's bundle at `GET /docs/scalar.js`, cacheable by its ETag. Chromium renders it in
 * test/e2e/api-docs.e2e.ts.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as NodeHttp from "node:http"
import { gunzipSync } from "node:zlib"
import { rawRequest } from "./support/Http.js"
import { makeTestServer, serverPort } from "../src/testing.js"

// Set to another host than the test server's: the page must not depend on it.
const ISSUER = "https://auth.example.test"

interface BytesResponse {
  readonly status: number
  readonly headers: NodeHttp.IncomingHttpHeaders
  readonly body: Buffer
}

/** One request, the body as the bytes sent (gzip is not undone, unlike fetch). */
const bytesRequest = (port: number, method: string, path: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<BytesResponse>((resolve, reject) => {
      const outgoing = NodeHttp.request({ host: "127.0.0.1", port, method, path, headers }, (incoming) => {
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.on("end", () => resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: Buffer.concat(chunks) }))
        incoming.on("error", reject)
      })
      outgoing.on("error", reject)
      outgoing.end()
    })
  )

const request = (method: string, path: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(serverPort, (port) => bytesRequest(port, method, path, headers))

/** The policy's directives by name, each with its sources. */
const directives = (policy: string) =>
  new Map(
    policy.split(";").map((directive) => directive.trim().split(/\s+/)).filter(([name]) => name !== "")
      .map(([name = "", ...sources]) => [name, sources])
  )

describe("GET /docs", () => {
  layer(makeTestServer({ config: { issuer: ISSUER } }))((it) => {
    it.effect("is an HTML page under a Content-Security-Policy that lets in nothing from elsewhere", () =>
      Effect.gen(function*() {
        const response = yield* request("GET", "/docs")
        expect(response.status).toBe(200)
        expect(response.headers["content-type"]).toBe("text/html; charset=utf-8")
        expect(response.headers["x-content-type-options"]).toBe("nosniff")
        expect(response.headers["referrer-policy"]).toBe("no-referrer")
        const policy = directives(String(response.headers["content-security-policy"]))
        expect(policy.get("default-src")).toEqual(["'none'"])
        // Scripts: this server's only; WebAssembly compilation, but never eval or inline script.
        expect(policy.get("script-src")).toEqual(["'self'", "'wasm-unsafe-eval'"])
        expect(policy.get("connect-src")).toEqual(["'self'"])
        expect(policy.get("style-src")).toEqual(["'self'", "'unsafe-inline'"])
        expect(policy.get("frame-ancestors")).toEqual(["'none'"])
        expect(policy.get("base-uri")).toEqual(["'none'"])
        for (const [name, sources] of policy) {
          for (const source of sources) expect(source, `${name} ${source}`).toMatch(/^'[a-z-]+'$|^data:$/)
        }
      }))

    it.effect("names no other host, configures Scalar without inline script, and loads the served bundle", () =>
      Effect.gen(function*() {
        const html = (yield* request("GET", "/docs")).body.toString("utf8")
        expect(html).not.toMatch(/https?:\/\//)
        expect(html).not.toContain("example.test")
        const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
        expect(scripts.map(([, attributes]) => /\bsrc="([^"]*)"/.exec(attributes ?? "")?.[1])).toEqual([
          undefined,
          "/docs/scalar.js"
        ])
        // The one without src is data (JSON), which browsers do not run; it is empty, so Scalar
        // reads the document from data-url.
        const [, configAttributes = "", configBody] = scripts[0]!
        expect(configAttributes).toContain("id=\"api-reference\"")
        expect(configAttributes).toContain("type=\"application/json\"")
        expect(configBody?.trim()).toBe("")
        expect(configAttributes).toContain("data-url=\"/openapi.yaml\"")
        const configuration = JSON.parse(
          (/data-configuration="([^"]*)"/.exec(configAttributes)?.[1] ?? "").replaceAll("&quot;", "\"")
            .replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&")
        )
        expect(configuration).toMatchObject({
          withDefaultFonts: false,
          telemetry: false,
          hideClientButton: true,
          showToolbar: "never",
          servers: [{ url: "/" }]
        })
        expect(configuration).not.toHaveProperty("proxyUrl")
        expect((yield* request("GET", "/openapi.yaml")).status).toBe(200)
      }))

    it.effect("HEAD answers as GET does, without the page", () =>
      Effect.gen(function*() {
        const response = yield* request("HEAD", "/docs")
        expect(response.status).toBe(200)
        expect(response.headers["content-type"]).toBe("text/html; charset=utf-8")
        expect(response.headers["content-security-policy"]).toContain("default-src 'none'")
        expect(response.body.length).toBe(0)
      }))

    it.effect("other methods are 405 with Allow: GET, HEAD", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        for (const path of ["/docs", "/docs/scalar.js"]) {
          for (const method of ["POST", "PUT", "DELETE"]) {
            const response = yield* Effect.promise(() => rawRequest(port, { method, path, body: "{}" }))
            expect(response.status, `${method} ${path}`).toBe(405)
            expect(response.headers["allow"]).toBe("GET, HEAD")
            expect(JSON.parse(response.text).error).toBe("method_not_allowed")
          }
        }
      }))

    it.effect("paths beside it stay 404; /docs/ is the same page (its URLs are absolute paths)", () =>
      Effect.gen(function*() {
        for (const path of ["/docs/other.js", "/docs/scalar.js/x", "/docsx"]) {
          expect((yield* request("GET", path)).status, path).toBe(404)
        }
        const page = yield* request("GET", "/docs")
        const slashed = yield* request("GET", "/docs/")
        expect(slashed.status).toBe(200)
        expect(slashed.body.equals(page.body)).toBe(true)
      }))
  })
})

describe("GET /docs/scalar.js", () => {
  layer(makeTestServer())((it) => {
    it.effect("is Scalar's standalone bundle as JavaScript, with a validator", () =>
      Effect.gen(function*() {
        const response = yield* request("GET", "/docs/scalar.js")
        expect(response.status).toBe(200)
        expect(response.headers["content-type"]).toBe("text/javascript; charset=utf-8")
        expect(response.headers["x-content-type-options"]).toBe("nosniff")
        expect(response.headers["content-encoding"]).toBeUndefined()
        expect(response.headers["etag"]).toMatch(/^"[A-Za-z0-9_-]+"$/)
        expect(response.headers["cache-control"]).toBe("no-cache")
        expect(response.headers["vary"]).toBe("accept-encoding")
        expect(Number(response.headers["content-length"])).toBe(response.body.length)
        expect(response.body.length).toBeGreaterThan(1_000_000)
        expect(response.body.toString("utf8", 0, 300)).toContain("@scalar/api-reference")
      }))

    it.effect("answers 304 to its own ETag, and the same bytes again without one", () =>
      Effect.gen(function*() {
        const first = yield* request("GET", "/docs/scalar.js")
        const etag = String(first.headers["etag"])
        const revalidated = yield* request("GET", "/docs/scalar.js", { "if-none-match": etag })
        expect(revalidated.status).toBe(304)
        expect(revalidated.body.length).toBe(0)
        expect(revalidated.headers["etag"]).toBe(etag)
        expect((yield* request("GET", "/docs/scalar.js", { "if-none-match": `"other", W/${etag}` })).status).toBe(304)
        const stale = yield* request("GET", "/docs/scalar.js", { "if-none-match": "\"other\"" })
        expect(stale.status).toBe(200)
        expect(stale.body.equals(first.body)).toBe(true)
      }))

    it.effect("is gzipped for a client that takes gzip, under its own ETag", () =>
      Effect.gen(function*() {
        const plain = yield* request("GET", "/docs/scalar.js")
        const gzipped = yield* request("GET", "/docs/scalar.js", { "accept-encoding": "gzip, deflate, br" })
        expect(gzipped.status).toBe(200)
        expect(gzipped.headers["content-encoding"]).toBe("gzip")
        expect(gzipped.headers["content-type"]).toBe("text/javascript; charset=utf-8")
        expect(gzipped.headers["etag"]).not.toBe(plain.headers["etag"])
        expect(gzipped.body.length).toBeLessThan(plain.body.length / 2)
        expect(gunzipSync(gzipped.body).equals(plain.body)).toBe(true)
        const refused = yield* request("GET", "/docs/scalar.js", { "accept-encoding": "gzip;q=0, br" })
        expect(refused.headers["content-encoding"]).toBeUndefined()
        const revalidated = yield* request("GET", "/docs/scalar.js", {
          "accept-encoding": "gzip",
          "if-none-match": String(gzipped.headers["etag"])
        })
        expect(revalidated.status).toBe(304)
      }))

    it.effect("HEAD answers as GET does, without the bundle", () =>
      Effect.gen(function*() {
        const response = yield* request("HEAD", "/docs/scalar.js")
        expect(response.status).toBe(200)
        expect(response.headers["content-type"]).toBe("text/javascript; charset=utf-8")
        expect(response.headers["etag"]).toMatch(/^"/)
        expect(response.body.length).toBe(0)
      }))
  })
})
