/**
 * A save's key credentials: `add_key_credential` answered in `created_key_credentials`, so that
 * `created` holds secret credentials only; `add_credential` with `public_key` (deprecated) answered
 * as it always was, in `created`, byte for byte, with `Deprecation` and `Sunset`; the refusals of
 * the new change; on each storage.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { admin, makeTestServer, tokenRequest } from "../src/testing.js"
import { assertion, clientKey, createService, JWT_BEARER, type ServiceFixture, targetOf } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const ISSUER = "http://issuer.test"
const KEY_ITEM_MEMBERS = ["environment", "service_uuid", "client_id", "created_at", "public_key", "token_endpoint_auth_method"]
const SECRET_ITEM_MEMBERS = ["environment", "service_uuid", "client_id", "client_secret", "created_at", "token_endpoint_auth_method"]
const DEPRECATION_HEADERS = ["deprecation", "sunset", "link"]

const save = (service: ServiceFixture, changes: ReadonlyArray<Record<string, unknown>>) =>
  admin.post(`/admin/profiles/${service.profile}/save`, { changes })
const at = (service: ServiceFixture) => ({ environment: service.environment, service_uuid: service.uuid })

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("add_key_credential: its credential in created_key_credentials, secrets alone in created, no deprecation", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("EC"))
        const saved = yield* save(service, [
          { op: "add_key_credential", ...at(service), public_key: key.publicJwk },
          { op: "add_credential", ...at(service) }
        ])
        expect(saved.status).toBe(200)
        expect(Object.keys(saved.body)).toEqual(["created", "created_key_credentials", "removed"])
        expect(saved.body.created.map(Object.keys)).toEqual([SECRET_ITEM_MEMBERS])
        expect(saved.body.created_key_credentials.map(Object.keys)).toEqual([KEY_ITEM_MEMBERS])
        const [keyed] = saved.body.created_key_credentials
        expect(keyed.token_endpoint_auth_method).toBe("private_key_jwt")
        expect(keyed.public_key.kty).toBe("EC")
        for (const name of DEPRECATION_HEADERS) expect(saved.headers[name]).toBeUndefined()

        // Stored as a key credential: listed with its key, and it gets a token with private_key_jwt.
        const listed = yield* admin.get(`${service.servicePath}/credentials`)
        const entry = listed.body.credentials.find((c: { client_id: string }) => c.client_id === keyed.client_id)
        expect(entry.public_key).toEqual(keyed.public_key)
        const now = yield* Clock.currentTimeMillis
        const jwt = yield* Effect.promise(() => assertion(key, keyed.client_id, ISSUER, {}, now))
        const token = yield* tokenRequest({ ...targetOf(service), client_assertion_type: JWT_BEARER, client_assertion: jwt })
        expect(token.status).toBe(200)

        const audit = yield* admin.get(`/admin/audit?profile=${service.profile}`)
        const added = audit.body.events.filter((event: { action: string }) => event.action === "credential.added")
        expect(added.map((event: { client_id: string }) => event.client_id).sort())
          .toEqual([keyed.client_id, saved.body.created[0].client_id].sort())
      }))

    it.effect("add_credential with public_key (deprecated): the answer of before, byte for byte, with Deprecation and Sunset", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("Ed25519"))
        const saved = yield* save(service, [{ op: "add_credential", ...at(service), public_key: key.publicJwk }])
        expect(saved.status).toBe(200)
        const [item] = saved.body.created
        expect(saved.text).toBe(JSON.stringify({
          created: [{
            environment: service.environment,
            service_uuid: service.uuid,
            client_id: item.client_id,
            created_at: item.created_at,
            public_key: { kty: "OKP", kid: item.public_key.kid, thumbprint: item.public_key.thumbprint },
            token_endpoint_auth_method: "private_key_jwt"
          }],
          removed: []
        }))
        expect(saved.headers["content-type"]).toBe("application/json")
        expect(saved.headers["deprecation"]).toBe("@1795910400")
        expect(saved.headers["sunset"]).toBe("Sat, 29 May 2027 00:00:00 GMT")
        expect(saved.headers["link"]).toBeUndefined()

        // A save without a key answers as always: no new member, no deprecation.
        const other = yield* createService()
        const secret = yield* save(other, [{ op: "add_credential", ...at(other) }])
        expect(Object.keys(secret.body)).toEqual(["created", "removed"])
        expect(secret.body.created.map(Object.keys)).toEqual([SECRET_ITEM_MEMBERS])
        for (const name of DEPRECATION_HEADERS) expect(secret.headers[name]).toBeUndefined()
      }))

    it.effect("both forms in one save: each key credential answered where its change asks, in order", () =>
      Effect.gen(function*() {
        const first = yield* createService()
        const [oldKey, newKey] = yield* Effect.promise(() => Promise.all([clientKey("RSA"), clientKey("EC")]))
        const made = yield* admin.post(`/admin/profiles/${first.profile}/environments/${first.environment}/services`, {
          auth_type: "oauth"
        })
        const sibling = { ...first, uuid: made.body.uuid as string }
        const saved = yield* save(first, [
          { op: "add_credential", ...at(first), public_key: oldKey.publicJwk },
          { op: "add_key_credential", ...at(sibling), public_key: newKey.publicJwk },
          { op: "add_credential", ...at(sibling) }
        ])
        expect(saved.status).toBe(200)
        expect(saved.body.created.map((c: { service_uuid: string; token_endpoint_auth_method: string }) => [
          c.service_uuid,
          c.token_endpoint_auth_method
        ])).toEqual([[first.uuid, "private_key_jwt"], [sibling.uuid, "client_secret_basic"]])
        expect(saved.body.created_key_credentials.map((c: { service_uuid: string }) => c.service_uuid)).toEqual([sibling.uuid])
        expect(saved.body.created_key_credentials[0].public_key.kty).toBe("EC")
        expect(saved.headers["deprecation"]).toBe("@1795910400")
      }))

    it.effect("add_key_credential refusals: 400 without or with a bad key or expiry, 404, 409 at the limit, nothing written", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("RSA"))
        const refusals: Array<[Record<string, unknown>, string]> = [
          [{ op: "add_key_credential", ...at(service) }, "changes.0.public_key: is missing"],
          [{ op: "add_key_credential", ...at(service), public_key: "not a key" }, "changes.0."],
          [{ op: "add_key_credential", ...at(service), public_key: { kty: "oct", k: "c2VjcmV0" } }, "changes.0."],
          [{ op: "add_key_credential", ...at(service), public_key: key.publicJwk, expires_at: "tomorrow" }, "changes.0.expires_at"],
          [{ op: "add_key_credential", ...at(service), public_key: key.publicJwk, client_id: "svc_x" }, "changes.0"]
        ]
        for (const [change, description] of refusals) {
          const refused = yield* save(service, [change])
          expect(refused.status, JSON.stringify(change)).toBe(400)
          expect(refused.body.error).toBe("invalid_request")
          expect(refused.body.error_description.startsWith(description), refused.body.error_description).toBe(true)
        }
        const missing = yield* save(service, [
          {
            op: "add_key_credential",
            environment: service.environment,
            service_uuid: "00000000-0000-4000-8000-000000000000",
            public_key: key.publicJwk
          }
        ])
        expect(missing.status).toBe(404)
        expect(missing.body.error).toBe("not_found")

        const three = yield* save(service, [
          { op: "add_credential", ...at(service) },
          { op: "add_key_credential", ...at(service), public_key: key.publicJwk },
          { op: "add_key_credential", ...at(service), public_key: key.publicJwk }
        ])
        expect(three.status).toBe(409)
        expect(three.body.error).toBe("credential_limit_exceeded")
        expect((yield* admin.get(`${service.servicePath}/credentials`)).body.credentials).toEqual([])
      }))
  })

describe("a save's key credentials (memory)", () => suite())
describe("a save's key credentials (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("a save's key credentials (PostgreSQL)", () => suite({ storage: postgresStorage() }))
