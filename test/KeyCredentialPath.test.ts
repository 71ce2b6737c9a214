/**
 * Key credentials have an operation of their own, POST …/key-credentials; the same body sent to
 * POST …/credentials keeps its status and body and is marked deprecated (Deprecation, Sunset and a
 * Link to the successor), while a secret request there answers exactly as before.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { admin, makeTestServer } from "../src/testing.js"
import { clientKey, createService } from "./support/ClientKeys.js"

const KEY_ANSWER_MEMBERS = ["client_id", "created_at", "public_key", "token_endpoint_auth_method"]
const DEPRECATION_HEADERS = ["deprecation", "sunset", "link"]

layer(makeTestServer(), { timeout: 120_000 })((it) => {
  it.effect("POST …/key-credentials: 201 with the key credential, as POST …/credentials answered it", () =>
    Effect.gen(function*() {
      const service = yield* createService()
      const key = yield* Effect.promise(() => clientKey("EC"))
      const viaNew = yield* admin.post(`${service.servicePath}/key-credentials`, { public_key: key.publicJwk })
      expect(viaNew.status).toBe(201)
      expect(Object.keys(viaNew.body)).toEqual(KEY_ANSWER_MEMBERS)
      expect(viaNew.body.token_endpoint_auth_method).toBe("private_key_jwt")
      for (const name of DEPRECATION_HEADERS) expect(viaNew.headers[name]).toBeUndefined()

      const viaOld = yield* admin.post(`${service.servicePath}/credentials`, { public_key: key.publicJwk })
      expect(viaOld.status).toBe(201)
      expect(Object.keys(viaOld.body)).toEqual(KEY_ANSWER_MEMBERS)
      expect(viaOld.body.public_key).toEqual(viaNew.body.public_key)
      expect(viaOld.headers["content-type"]).toBe(viaNew.headers["content-type"])

      const listed = yield* admin.get(`${service.servicePath}/credentials`)
      expect(listed.body.credentials.map((c: { client_id: string }) => c.client_id).sort())
        .toEqual([viaNew.body.client_id, viaOld.body.client_id].sort())
    }))

  it.effect("POST …/credentials with public_key is deprecated: Deprecation, Sunset and the successor's Link", () =>
    Effect.gen(function*() {
      const service = yield* createService()
      const key = yield* Effect.promise(() => clientKey("Ed25519"))
      const old = yield* admin.post(`${service.servicePath}/credentials`, { public_key: key.publicJwk })
      expect(old.status).toBe(201)
      expect(old.headers["deprecation"]).toBe("@1795910400")
      expect(old.headers["sunset"]).toBe("Sat, 29 May 2027 00:00:00 GMT")
      expect(new Date(old.headers["sunset"]!).toISOString()).toBe("2027-05-29T00:00:00.000Z")
      expect(old.headers["link"]).toBe(`<${service.servicePath}/key-credentials>; rel="successor-version"`)

      const secret = yield* admin.post(`${service.servicePath}/credentials`)
      expect(secret.status).toBe(201)
      expect(Object.keys(secret.body)).toEqual(["client_id", "client_secret", "created_at", "token_endpoint_auth_method"])
      for (const name of DEPRECATION_HEADERS) expect(secret.headers[name]).toBeUndefined()
    }))

  it.effect("POST …/key-credentials: same limit (409), same refusals (400, 404), same audit event", () =>
    Effect.gen(function*() {
      const service = yield* createService()
      const key = yield* Effect.promise(() => clientKey("RSA"))
      expect((yield* admin.post(`${service.servicePath}/credentials`)).status).toBe(201)
      const added = yield* admin.post(`${service.servicePath}/key-credentials`, { public_key: key.publicJwk })
      expect(added.status).toBe(201)
      const third = yield* admin.post(`${service.servicePath}/key-credentials`, { public_key: key.publicJwk })
      const thirdOld = yield* admin.post(`${service.servicePath}/credentials`, { public_key: key.publicJwk })
      expect(third.status).toBe(409)
      expect(third.body).toEqual(thirdOld.body)
      expect(third.body.error).toBe("credential_limit_exceeded")

      const other = yield* createService()
      for (
        const body of [{}, { public_key: "not a key" }, { public_key: { kty: "oct", k: "c2VjcmV0" } }, {
          public_key: key.publicJwk,
          extra: 1
        }]
      ) {
        const viaNew = yield* admin.post(`${other.servicePath}/key-credentials`, body)
        expect(viaNew.status).toBe(400)
        expect(viaNew.body.error).toBe("invalid_request")
      }
      const bad = { public_key: "not a key" }
      expect((yield* admin.post(`${other.servicePath}/key-credentials`, bad)).body)
        .toEqual((yield* admin.post(`${other.servicePath}/credentials`, bad)).body)

      const missing = yield* admin.post(
        `/admin/profiles/${other.profile}/environments/${other.environment}/services/00000000-0000-4000-8000-000000000000/key-credentials`,
        { public_key: key.publicJwk }
      )
      expect(missing.status).toBe(404)

      const events = yield* admin.get(`/admin/audit?profile=${service.profile}`)
      expect(events.body.events.some((event: { action: string; client_id?: string; detail?: unknown }) =>
        event.action === "credential.added" && JSON.stringify(event).includes(added.body.client_id)
      )).toBe(true)
    }))
})
