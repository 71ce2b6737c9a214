/**
 * Key credentials through the admin API: a public JWK (RSA >= 2048 bits, EC P-256,
 * Ed25519) or a PEM public key instead of a generated secret, within the limit of two, in the
 * credential list, the profile document, the editor's save and the audit trail; and the export
 * file's check of a credential's verifier.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { calculateJwkThumbprint, exportSPKI, generateKeyPair, exportJWK } from "jose"
import { generateKeyPairSync } from "node:crypto"
import { keyVerifier, parsePublicJwk, pemToJwk, publicKeyInfo } from "../src/domain/KeyCredential.js"
import { CredentialRow } from "../src/transfer/ExportRows.js"
import { admin, makeTestServer } from "../src/testing.js"
import { addKeyCredential, clientKey, createService } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const PUBLIC_KEY = { kty: expect.any(String), kid: expect.any(String), thumbprint: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) }

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("creates RSA, EC and Ed25519 key credentials: 201 with client_id, created_at and public_key", () =>
      Effect.gen(function*() {
        for (const kind of ["RSA", "EC", "Ed25519"] as const) {
          const service = yield* createService()
          const key = yield* Effect.promise(() => clientKey(kind))
          const created = yield* addKeyCredential(service, key.publicJwk)
          expect(created.status).toBe(201)
          const thumbprint = yield* Effect.promise(() => calculateJwkThumbprint(key.publicJwk))
          expect(created.body).toEqual({
            client_id: expect.stringMatching(/^svc_[0-9a-f]{32}$/),
            created_at: expect.any(String),
            public_key: { kty: kind === "Ed25519" ? "OKP" : kind, kid: thumbprint, thumbprint },
            token_endpoint_auth_method: "private_key_jwt"
          })
          expect(Object.keys(created.body)).toEqual(["client_id", "created_at", "public_key", "token_endpoint_auth_method"])
          const listed = yield* admin.get(`${service.servicePath}/credentials`)
          expect(listed.body.credentials).toEqual([{
            client_id: created.body.client_id,
            created_at: created.body.created_at,
            expires_at: null,
            last_used_at: null,
            public_key: created.body.public_key
          }])
        }
      }))

    it.effect("keeps the JWK's kid; accepts a PEM public key", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("EC"))
        const withKid = yield* addKeyCredential(service, { ...key.publicJwk, kid: "client-key-1" })
        expect(withKid.status).toBe(201)
        expect(withKid.body.public_key.kid).toBe("client-key-1")
        const { publicKey } = yield* Effect.promise(() => generateKeyPair("RS256", { extractable: true }))
        const pem = yield* Effect.promise(() => exportSPKI(publicKey))
        const fromPem = yield* addKeyCredential(service, pem)
        expect(fromPem.status).toBe(201)
        expect(fromPem.body.public_key).toEqual({ ...PUBLIC_KEY, kty: "RSA" })
      }))

    it.effect("counts toward the limit of two with secret credentials", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        expect((yield* admin.post(`${service.servicePath}/credentials`)).status).toBe(201)
        const key = yield* Effect.promise(() => clientKey("Ed25519"))
        expect((yield* addKeyCredential(service, key.publicJwk)).status).toBe(201)
        const third = yield* addKeyCredential(service, key.publicJwk)
        expect(third.status).toBe(409)
        expect(third.body.error).toBe("credential_limit_exceeded")
      }))

    it.effect("refuses private keys, small RSA keys, other curves, symmetric keys and garbage: 400 invalid_request", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const rsa = yield* Effect.promise(() => generateKeyPair("RS256", { extractable: true }))
        const privateJwk = yield* Effect.promise(() => exportJWK(rsa.privateKey))
        const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" })
        const p384 = generateKeyPairSync("ec", { namedCurve: "P-384" }).publicKey.export({ format: "jwk" })
        const privatePem = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" })
        for (const bad of [privateJwk, small, p384, { kty: "oct", k: "c2VjcmV0" }, { kty: "RSA" }, "not a key", privatePem, 42]) {
          const refused = yield* addKeyCredential(service, bad)
          expect(refused.status).toBe(400)
          expect(refused.body.error).toBe("invalid_request")
          expect(refused.text).not.toContain(String((privateJwk as { d: string }).d))
        }
        expect((yield* admin.get(`${service.servicePath}/credentials`)).body.credentials).toEqual([])
      }))

    it.effect("the editor's save adds key credentials; the audit trail records them", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("RSA"))
        const saved = yield* admin.post(`/admin/profiles/${service.profile}/save`, {
          changes: [
            { op: "add_credential", environment: service.environment, service_uuid: service.uuid, public_key: key.publicJwk },
            { op: "add_credential", environment: service.environment, service_uuid: service.uuid }
          ]
        })
        expect(saved.status).toBe(200)
        expect(saved.body.created[0]).toEqual({
          environment: service.environment,
          service_uuid: service.uuid,
          client_id: expect.any(String),
          created_at: expect.any(String),
          public_key: { ...PUBLIC_KEY, kty: "RSA" },
          token_endpoint_auth_method: "private_key_jwt"
        })
        expect(saved.body.created[1].client_secret).toEqual(expect.any(String))
        expect(saved.body.created[1].token_endpoint_auth_method).toBe("client_secret_basic")
        const profile = yield* admin.get(`/admin/profiles/${service.profile}`)
        const credentials = profile.body.environments[0].services[0].credentials
        expect(credentials[0].public_key).toEqual(saved.body.created[0].public_key)
        expect(credentials[1].public_key).toBeUndefined()
        const audit = yield* admin.get(`/admin/audit?profile=${service.profile}`)
        const added = audit.body.events.filter((event: { action: string }) => event.action === "credential.added")
        expect(added.map((event: { client_id: string }) => event.client_id).sort()).toEqual(
          [saved.body.created[0].client_id, saved.body.created[1].client_id].sort()
        )
      }))
  })

describe("key credentials through the admin API (memory)", () => suite())
describe("key credentials through the admin API (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("key credentials through the admin API (PostgreSQL)", () => suite({ storage: postgresStorage() }))

describe("a key credential's verifier", () => {
  it("is a public key that parses back, with the RFC 7638 thumbprint", async () => {
    const key = await clientKey("EC")
    const jwk = parsePublicJwk(key.publicJwk)
    if (jwk._tag === "Left") throw new Error(jwk.left)
    const verifier = keyVerifier(jwk.right)
    expect(publicKeyInfo(verifier)?.thumbprint).toBe(await calculateJwkThumbprint(key.publicJwk))
    expect(publicKeyInfo("a".repeat(64))).toBeUndefined()
    expect(pemToJwk("garbage")._tag).toBe("Left")
  })

  it("travels in an export file; anything else is refused there", async () => {
    const key = await clientKey("Ed25519")
    const jwk = parsePublicJwk(key.publicJwk)
    if (jwk._tag === "Left") throw new Error(jwk.left)
    const row = {
      client_id: `svc_${"0".repeat(32)}`,
      profile: "p",
      environment: "e",
      service_uuid: "00000000-0000-4000-8000-000000000000",
      created_at: "2026-01-01T00:00:00.000Z",
      last_used_at: null,
      deleted_at: null
    }
    const decode = Schema.decodeUnknownEither(CredentialRow)
    expect(decode({ ...row, secret_hash: keyVerifier(jwk.right) })._tag).toBe("Right")
    expect(decode({ ...row, secret_hash: "a".repeat(64) })._tag).toBe("Right")
    expect(decode({ ...row, secret_hash: "jwk:{\"kty\":\"oct\",\"k\":\"x\"}" })._tag).toBe("Left")
  })
})
