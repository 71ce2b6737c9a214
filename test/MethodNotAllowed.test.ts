/**
 * A known path asked with a method it does not answer: 405 with `Allow` (RFC 9110 §15.5.6) and the
 * JSON error body; a path the API does not have stays 404 `not_found`.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { ADMIN_TOKEN, makeTestServer, serverPort } from "../src/testing.js"
import { rawRequest } from "./support/Http.js"

const UUID = "6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7"
const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }

describe("405 method not allowed", () => {
  layer(makeTestServer())((it) => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["GET", "/oauth/token", "POST"],
      ["PUT", "/oauth/token", "POST"],
      ["DELETE", "/oauth/token", "POST"],
      ["GET", `/service/acme/production/json/${UUID}`, "POST"],
      ["PUT", "/service/any/thing/json/not-even-a-uuid", "POST"],
      ["POST", "/.well-known/jwks.json", "GET, HEAD"],
      ["DELETE", "/healthz", "GET, HEAD"],
      ["POST", "/openapi.yaml", "GET, HEAD"],
      ["DELETE", "/admin", "GET, HEAD"],
      ["POST", "/", "GET, HEAD"],
      ["POST", "/admin/profiles", "GET, HEAD"],
      ["POST", "/admin/profiles/acme", "GET, HEAD, PUT, DELETE"],
      ["GET", "/admin/profiles/acme/environments/production", "PUT, DELETE"],
      ["PUT", "/admin/profiles/acme/environments/production/services", "POST"],
      ["POST", `/admin/profiles/acme/environments/production/services/${UUID}/credentials/svc_x`, "DELETE"],
      ["GET", "/admin/profiles/acme/save", "POST"]
    ]
    for (const [method, path, allow] of cases) {
      it.effect(`${method} ${path} → 405, Allow: ${allow}`, () =>
        Effect.gen(function*() {
          const port = yield* serverPort
          const response = yield* Effect.promise(() =>
            rawRequest(port, { method, path, headers: ADMIN, ...(method === "GET" ? {} : { body: "{}" }) })
          )
          expect(response.status).toBe(405)
          expect(response.headers["allow"]).toBe(allow)
          expect(response.headers["content-type"]).toMatch(/^application\/json/)
          expect(JSON.parse(response.text)).toEqual({
            error: "method_not_allowed",
            error_description: `The ${method} method is not allowed here; this path accepts ${allow}`
          })
          if (path === "/oauth/token") {
            expect(response.headers["cache-control"]).toBe("no-store")
            expect(response.headers["pragma"]).toBe("no-cache")
          }
        }))
    }

    it.effect("unknown paths, and a known method the router cannot match, stay 404 not_found", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        for (
          const [method, path] of [
            ["GET", "/nope"],
            ["POST", "/oauth/token/extra"],
            ["GET", "/healthzz"],
            ["GET", "//"],
            ["DELETE", "//healthz"],
            ["POST", `/service/acme/production/json/${UUID}/more`],
            // A segment longer than the router takes: the method is right, so this is no 405.
            ["PUT", `/admin/profiles/${"p".repeat(2_000)}`]
          ] as const
        ) {
          const response = yield* Effect.promise(() => rawRequest(port, { method, path, headers: ADMIN, body: "{}" }))
          expect(response.status, `${method} ${path.slice(0, 60)}`).toBe(404)
          expect(response.headers["allow"]).toBeUndefined()
          expect(JSON.parse(response.text).error).toBe("not_found")
        }
      }))

    it.effect("GET / leads a browser to the profile editor", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const response = yield* Effect.promise(() => rawRequest(port, { method: "GET", path: "/" }))
        expect(response.status).toBe(302)
        expect(response.headers["location"]).toBe("/admin")
      }))

    it.effect("only web files of the editor are served: its modules, not what is kept beside them", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const module = yield* Effect.promise(() => rawRequest(port, { method: "GET", path: "/admin/assets/editor-changes.js" }))
        expect(module.status).toBe(200)
        expect(module.headers["content-type"]).toMatch(/^text\/javascript/)
        const declarations = yield* Effect.promise(() => rawRequest(port, { method: "GET", path: "/admin/assets/editor-changes.d.ts" }))
        expect(declarations.status).toBe(404)
      }))

    it.effect("HEAD where GET is answered is not a 405", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const response = yield* Effect.promise(() => rawRequest(port, { method: "HEAD", path: "/healthz" }))
        expect(response.status).toBe(200)
      }))
  })
})
