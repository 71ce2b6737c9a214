/**
 * The admin JSON API over HTTP, as docs/contract.md §3 states it: the admin token every endpoint requires.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { basicAuthorization, request, unknownClientId } from "./support/Http.js"
import { admin, ADMIN_TOKEN, type JsonResponse, makeTestServer, uniqueName } from "../src/testing.js"
import { expectError, expectStatus, paths } from "./support/AdminApi.js"

/** Every endpoint of the admin API, addressed at things that need not exist. */
const EVERY_ENDPOINT: ReadonlyArray<readonly ["GET" | "PUT" | "POST" | "DELETE", string]> = [
  ["GET", "/admin/profiles"],
  ["PUT", "/admin/profiles/p1"],
  ["GET", "/admin/profiles/p1"],
  ["DELETE", "/admin/profiles/p1"],
  ["POST", "/admin/profiles/p1/save"],
  ["PUT", "/admin/profiles/p1/environments/e1"],
  ["DELETE", "/admin/profiles/p1/environments/e1"],
  ["POST", "/admin/profiles/p1/environments/e1/services"],
  ["PUT", `/admin/profiles/p1/environments/e1/services/${randomUUID()}`],
  ["DELETE", `/admin/profiles/p1/environments/e1/services/${randomUUID()}`],
  ["GET", `/admin/profiles/p1/environments/e1/services/${randomUUID()}/credentials`],
  ["POST", `/admin/profiles/p1/environments/e1/services/${randomUUID()}/credentials`],
  ["DELETE", `/admin/profiles/p1/environments/e1/services/${randomUUID()}/credentials/${unknownClientId()}`],
  ["GET", "/admin/audit"],
  ["GET", "/admin/keys"],
  ["POST", "/admin/keys/rotate"]
]

/** 401 unauthorized with the admin API's Bearer challenge (RFC 6750 §3). */
const expectUnauthorized = (response: JsonResponse) => {
  expectError(response, 401, "unauthorized")
  expect(response.headers["www-authenticate"]).toBe(`Bearer realm="admin"`)
}

// `layer(...)`, not `it.layer(...)`: in @effect/vitest 0.30 the first `it.layer` call overwrites
// the shared `it.layer` with its nested form, so a second describe block would nest its server in
// the first one's (one listening socket answered by several apps, sharing one store).
describe("admin API: the admin token", () => {
  layer(makeTestServer())((it) => {
    for (const [method, path] of EVERY_ENDPOINT) {
      it.effect(`${method} ${path.replace(/[0-9a-f-]{36}|svc_[0-9a-f]{32}/g, "…")} without Authorization → 401 unauthorized, Bearer challenge`, () =>
        Effect.gen(function*() {
          const body = method === "PUT" || method === "POST" ? "{}" : undefined
          const response = yield* request(method, path, body === undefined ? {} : { body, contentType: "application/json" })
          expectUnauthorized(response)
        }))
    }

    it.effect("a wrong admin token → 401 unauthorized", () =>
      Effect.gen(function*() {
        const response = yield* request("GET", "/admin/profiles", { headers: { authorization: "Bearer not-the-admin-token" } })
        expectUnauthorized(response)
      }))

    it.effect("the admin token under the Basic scheme → 401 unauthorized", () =>
      Effect.gen(function*() {
        const asToken68 = yield* request("GET", "/admin/profiles", { headers: { authorization: `Basic ${ADMIN_TOKEN}` } })
        expectUnauthorized(asToken68)
        const asBasic = yield* request("GET", "/admin/profiles", {
          headers: { authorization: basicAuthorization("admin", ADMIN_TOKEN) }
        })
        expectUnauthorized(asBasic)
      }))

    it.effect("\"Bearer\" with an empty token → 401 unauthorized", () =>
      Effect.gen(function*() {
        const response = yield* request("GET", "/admin/profiles", { headers: { authorization: "Bearer " } })
        expectUnauthorized(response)
      }))

    it.effect("the admin token is accepted, with the scheme in any case (and no challenge)", () =>
      Effect.gen(function*() {
        const accepted = yield* request("GET", "/admin/profiles", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
        expectStatus(accepted, 200)
        expect(accepted.headers["www-authenticate"]).toBeUndefined()
        expectStatus(yield* request("GET", "/admin/profiles", { headers: { authorization: `bearer ${ADMIN_TOKEN}` } }), 200)
      }))

    it.effect("a refused PUT changes nothing", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        const response = yield* request("PUT", paths.profile(profile), {
          body: "{}",
          contentType: "application/json",
          headers: { authorization: "Bearer wrong" }
        })
        expectUnauthorized(response)
        expectError(yield* admin.get(paths.profile(profile)), 404, "not_found")
      }))
  })
})
