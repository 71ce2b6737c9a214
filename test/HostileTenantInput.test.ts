/**
 * What a tenant's admin sends as a key or a time, written as an attacker would: every weak or
 * malformed public key (RSA exponents other than 65537, zero-padded or even moduli, EC and Ed25519
 * points in a second encoding or of small order) and every time outside RFC 3339 with an offset and a
 * four-digit year answers 400 `invalid_request` naming its field, in the single POST and in the
 * editor's save. A weak key stored by other means verifies nothing: an assertion "signed" with e = 1
 * (the padded hash itself, no private key) gets no token. Every edge time that is accepted survives
 * an export and an import into a fresh database unchanged. On memory, embedded and PostgreSQL storage.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Redacted } from "effect"
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, randomUUID, verify } from "node:crypto"
import { DIGEST_KEY_NAME } from "../src/catalogue/ClientSecrets.js"
import { ServerKeyStore } from "../src/keys/ServerKeyStore.js"
import { keyVerifier } from "../src/domain/KeyCredential.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../src/domain/Identifiers.js"
import { DATE_TIME_RULE } from "../src/domain/Models.js"
import { parseRfc3339 } from "../src/domain/Time.js"
import { CatalogueWrites } from "../src/catalogue/CatalogueWrites.js"
import * as Storage from "../src/storage/Storage.js"
import { admin, makeTestServer, TEST_ACTOR, tokenRequest } from "../src/testing.js"
import { exportDatabase } from "../src/transfer/ExportDatabase.js"
import { importDatabase } from "../src/transfer/ImportDatabase.js"
import { addKeyCredential, clientKey, createService, JWT_BEARER, type ServiceFixture, targetOf } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedClient, embeddedStorage, freshDatabase, isolatedPostgresStorage } from "./support/Databases.js"

const ISSUER = "http://issuer.test"
const DAY_MS = 86_400_000
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")
const rsaJwk = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ format: "jwk" }) as { n: string; e: string }
const ecJwk = () => generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" }) as Record<string, string>
const ed25519Jwk = () => generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }) as Record<string, string>

/** Keys no one should be able to register, each with the start of the 400's description. */
const weakKeys = (): ReadonlyArray<readonly [string, unknown, string]> => {
  const rsa = rsaJwk()
  const modulus = Buffer.from(rsa.n, "base64url")
  const even = Buffer.from(modulus)
  even[even.length - 1]! &= 0xfe
  const huge = randomBytes(2049)
  huge[0]! |= 0x80
  huge[huge.length - 1]! |= 1
  const ec = ecJwk()
  const offCurve = Buffer.from(ec.y!, "base64url")
  offCurve[31]! ^= 1
  const ed = ed25519Jwk()
  const e3 = generateKeyPairSync("rsa", { modulusLength: 2048, publicExponent: 3 }).publicKey.export({ format: "pem", type: "spki" })
  return [
    ["RSA e = 1", { kty: "RSA", n: rsa.n, e: "AQ" }, "public_key.e must be AQAB"],
    ["RSA e = 3", { kty: "RSA", n: rsa.n, e: "Aw" }, "public_key.e must be AQAB"],
    ["RSA e = 65536", { kty: "RSA", n: rsa.n, e: "AQAA" }, "public_key.e must be AQAB"],
    ["RSA e = 65537 with a leading zero byte", { kty: "RSA", n: rsa.n, e: "AAEAAQ" }, "public_key.e must be AQAB"],
    ["RSA e huge", { kty: "RSA", n: rsa.n, e: b64(Buffer.alloc(300, 0xff)) }, "public_key.e must be AQAB"],
    ["RSA e as a number", { kty: "RSA", n: rsa.n, e: 65537 }, "public_key must be an RSA"],
    ["RSA e = 3 as a PEM", e3, "public_key.e must be AQAB"],
    ["RSA n with a leading zero byte", { kty: "RSA", n: b64(Buffer.concat([Buffer.alloc(1), modulus])), e: "AQAB" }, "public_key.n"],
    ["RSA n even", { kty: "RSA", n: b64(even), e: "AQAB" }, "public_key.n must be an odd modulus"],
    ["RSA n of 16392 bits", { kty: "RSA", n: b64(huge), e: "AQAB" }, "public_key must be an RSA key of at most 16384 bits"],
    ["RSA n of 1024 bits", {
      kty: "RSA",
      n: (generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" }) as { n: string }).n,
      e: "AQAB"
    }, "public_key must be an RSA key of at least 2048 bits"],
    ["EC x with a leading zero byte", { ...ec, x: b64(Buffer.concat([Buffer.alloc(1), Buffer.from(ec.x!, "base64url")])) }, "public_key.x"],
    ["EC x of 31 bytes", { ...ec, x: b64(Buffer.from(ec.x!, "base64url").subarray(1)) }, "public_key.x"],
    ["EC point off the curve", { ...ec, y: b64(offCurve) }, "public_key is not a valid public key"],
    ["EC P-384", generateKeyPairSync("ec", { namedCurve: "P-384" }).publicKey.export({ format: "jwk" }), "public_key must be"],
    ["Ed25519 zero point", { ...ed, x: b64(Buffer.alloc(32)) }, "public_key.x must be an Ed25519 point of the main group"],
    ["Ed25519 identity", { ...ed, x: b64(Buffer.from("01".padEnd(64, "0"), "hex")) }, "public_key.x must be an Ed25519 point"],
    [
      "Ed25519 point of order 8",
      { ...ed, x: b64(Buffer.from("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", "hex")) },
      "public_key.x"
    ],
    ["Ed25519 y = p", { ...ed, x: b64(Buffer.from(`ed${"ff".repeat(30)}7f`, "hex")) }, "public_key.x must be an Ed25519 point"],
    ["Ed25519 x of 33 bytes", { ...ed, x: b64(Buffer.concat([Buffer.from(ed.x!, "base64url"), Buffer.alloc(1)])) }, "public_key.x"]
  ]
}

/** Times refused wherever the API takes one. */
const MALFORMED_TIMES: ReadonlyArray<unknown> = [
  "2030-01-01",
  "2030-01-01T00:00:00",
  "2030-01-01T00:00",
  "2030-01-01 00:00:00Z",
  "2030-01-01T00:00:00 Z",
  "10000-01-01T00:00:00Z",
  "+010000-01-01T00:00:00Z",
  "-000001-01-01T00:00:00Z",
  "0000-01-01T00:00:00Z",
  "275760-09-13T00:00:00Z",
  "2030-02-30T00:00:00Z",
  "2030-02-29T00:00:00Z",
  "2100-02-29T00:00:00Z",
  "2030-04-31T00:00:00Z",
  "2030-13-01T00:00:00Z",
  "2030-00-10T00:00:00Z",
  "2030-01-00T00:00:00Z",
  "2030-01-01T24:00:00Z",
  "2030-12-31T23:59:60Z",
  "2030-01-01T00:60:00Z",
  "2030-01-01T00:00:00+24:00",
  "2030-01-01T00:00:00+01:60",
  "2030-01-01T00:00:00+0100",
  "2030-01-01T00:00:00+01",
  "2030-01-01T00:00:00.Z",
  "2030-01-01T00:00:00.1234567890Z",
  "2030-01-01T00:00:00,5Z",
  "9999-12-31T23:59:59-00:01",
  "9999-12-31T23:59:60Z",
  "Jan 1 2030",
  "Tue, 01 Jan 2030 00:00:00 GMT",
  "2030",
  "1893456000",
  "",
  " 2030-01-01T00:00:00Z",
  "2030-01-01T00:00:00Z\n",
  "２０３０-01-01T00:00:00Z",
  1893456000,
  null,
  true,
  {},
  ["2030-01-01T00:00:00Z"]
]

/** Times accepted at the TestClock's start (1970-01-01T00:00:00Z) without a lifetime policy, at the edges. */
const EDGE_TIMES: ReadonlyArray<string> = [
  "1970-01-01T00:00:00.001Z",
  "1970-01-01T01:00:00.001+01:00",
  "1969-12-31T12:00:01-12:00",
  "2028-02-29T12:00:00.5+05:30",
  "2030-06-15t10:20:30z",
  "2030-01-01T00:00:00.123456789Z",
  "2030-01-01T00:00:00-00:00",
  "9999-12-31T23:59:59Z",
  "9999-12-31T23:59:59.999Z",
  "9999-12-31T23:59:59.999999999Z",
  "9999-12-31T09:59:59-14:00",
  "9999-12-31T23:59:59+14:00"
]

const added = (service: ServiceFixture, change: Record<string, unknown>) =>
  admin.post(`/admin/profiles/${service.profile}/save`, {
    changes: [{ op: "add_credential", environment: service.environment, service_uuid: service.uuid, ...change }]
  })

/** An RS256 "signature" valid under e = 1: the PKCS #1 v1.5 encoding of the hash, made without any private key. */
const forgedForExponentOne = (claims: Record<string, unknown>, modulusBytes: number) => {
  const input = `${b64(Buffer.from(JSON.stringify({ alg: "RS256", typ: "JWT" })))}.${b64(Buffer.from(JSON.stringify(claims)))}`
  const digestInfo = Buffer.concat([
    Buffer.from("3031300d060960864801650304020105000420", "hex"),
    createHash("sha256").update(input).digest()
  ])
  const encoded = Buffer.concat([
    Buffer.from([0, 1]),
    Buffer.alloc(modulusBytes - 3 - digestInfo.length, 0xff),
    Buffer.from([0]),
    digestInfo
  ])
  return { input, signature: encoded, jwt: `${input}.${b64(encoded)}` }
}

/**
 * The test server's database exported (its SQL storage layer holds the client, which its type does
 * not show). Its test digest key is not stored by the server: it is stored here, as a server would.
 */
const exportOf = Effect.gen(function*() {
  yield* (yield* ServerKeyStore).getOrCreate(DIGEST_KEY_NAME, async () => Buffer.alloc(32, 7).toString("base64url"))
  const context = yield* Effect.context<never>()
  return yield* exportDatabase().pipe(Effect.provideService(SqlClient.SqlClient, Context.unsafeGet(context, SqlClient.SqlClient)))
})

const suite = (storage: Parameters<typeof makeTestServer>[0], fresh?: () => Layer.Layer<SqlClient.SqlClient, unknown>) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("refuses every weak or malformed key with 400 naming public_key, alone and in a save", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        for (const [name, key, problem] of weakKeys()) {
          for (const response of [yield* addKeyCredential(service, key), yield* added(service, { public_key: key })]) {
            expect({ name, status: response.status, error: response.body.error }).toEqual({
              name,
              status: 400,
              error: "invalid_request"
            })
            expect(response.body.error_description, name).toMatch(/^(changes\.0\.)?public_key/)
            expect(response.body.error_description, name).toContain(problem)
          }
        }
        expect((yield* admin.get(`${service.servicePath}/credentials`)).body.credentials).toEqual([])
        const good = yield* Effect.promise(() => clientKey("RSA"))
        expect((yield* addKeyCredential(service, good.publicJwk)).status).toBe(201)
      }))

    it.effect("refuses every time outside RFC 3339 with an offset and a four-digit year: 400 naming expires_at", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("EC"))
        for (const time of MALFORMED_TIMES) {
          const label = JSON.stringify(time)
          const secret = yield* admin.post(`${service.servicePath}/credentials`, { expires_at: time })
          const withKey = yield* admin.post(`${service.servicePath}/credentials`, { public_key: key.publicJwk, expires_at: time })
          for (const response of [secret, withKey]) {
            expect({ label, status: response.status, body: response.body }).toEqual({
              label,
              status: 400,
              body: { error: "invalid_request", error_description: `expires_at: ${DATE_TIME_RULE}` }
            })
          }
          const saved = yield* added(service, { expires_at: time })
          expect({ label, status: saved.status, error: saved.body.error }).toEqual({ label, status: 400, error: "invalid_request" })
          expect(saved.body.error_description, label).toMatch(/^changes\.0\.expires_at: /)
          if (typeof time === "string") expect(saved.body.error_description).toBe(`changes.0.expires_at: ${DATE_TIME_RULE}`)
        }
        expect((yield* admin.get(`${service.servicePath}/credentials`)).body.credentials).toEqual([])
      }))

    it.effect("a weak key stored by other means verifies nothing: an e = 1 forgery gets no token", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const { n } = rsaJwk()
        const weak = { kty: "RSA" as const, n, e: "AQ", kid: "weak" }
        const clientId = `svc_${randomBytes(16).toString("hex")}` as ClientId
        const writes = yield* CatalogueWrites
        yield* writes.applyCredentialChanges(
          service.profile as ProfileId,
          [{
            op: "add_credential",
            environment: service.environment as EnvironmentName,
            service_uuid: service.uuid as ServiceUuid,
            client_id: clientId,
            secret_hash: keyVerifier(weak),
            expires_at: null
          }],
          new Date(0),
          TEST_ACTOR
        )
        const claims = { iss: clientId, sub: clientId, aud: ISSUER, jti: randomUUID(), iat: 0, exp: 60 }
        const forged = forgedForExponentOne(claims, Buffer.from(n, "base64url").length)
        // The forgery is a valid signature under that key: only the key checks stand in its way.
        const weakKey = createPublicKey({ key: { kty: "RSA", n, e: "AQ" }, format: "jwk" })
        expect(verify("sha256", Buffer.from(forged.input), weakKey, forged.signature)).toBe(true)
        const response = yield* tokenRequest({
          ...targetOf(service),
          client_id: clientId,
          client_assertion_type: JWT_BEARER,
          client_assertion: forged.jwt
        })
        expect({ status: response.status, body: response.body }).toEqual({
          status: 401,
          body: { error: "invalid_client", error_description: "Invalid client credentials" }
        })
        if (fresh !== undefined) {
          // While it is live, it does not travel in an export; deleted, it does (its client id is kept).
          const refused = yield* Effect.flip(exportOf)
          expect(refused.message).toContain("secret_hash: a live credential's key must be one the API accepts")
          expect((yield* admin.delete(`${service.servicePath}/credentials/${clientId}`)).status).toBe(204)
          const exported = yield* exportOf
          expect(exported.tables.credentials.find((row) => row.client_id === clientId)?.deleted_at).not.toBeNull()
        }
      }))

    it.effect("accepts the edge times as the instants they name; through an export and an import they stay so", () =>
      Effect.gen(function*() {
        const expected = new Map<string, string>()
        const removed: Array<unknown> = []
        for (const [index, time] of EDGE_TIMES.entries()) {
          const service = yield* createService()
          const created = index % 2 === 0
            ? yield* admin.post(`${service.servicePath}/credentials`, { expires_at: time })
            : yield* added(service, { expires_at: time })
          expect({ time, status: created.status }).toEqual({ time, status: index % 2 === 0 ? 201 : 200 })
          const credential = index % 2 === 0 ? created.body : created.body.created[0]
          const instant = new Date(parseRfc3339(time)!).toISOString()
          expect({ time, expires_at: credential.expires_at }).toEqual({ time, expires_at: instant })
          expected.set(credential.client_id, instant)
          if (index % 3 === 0) {
            expect((yield* admin.delete(`${service.servicePath}/credentials/${credential.client_id}`)).status).toBe(204)
            removed.push(credential.client_id)
          }
        }
        // The longest lifetime a policy allows, to the millisecond; one millisecond more is refused.
        const capped = yield* createService()
        yield* admin.put(`/admin/profiles/${capped.profile}`, { credential_max_lifetime_days: 3650 })
        const longest = new Date(3650 * DAY_MS).toISOString()
        const atCap = yield* admin.post(`${capped.servicePath}/credentials`, { expires_at: longest })
        expect(atCap.status).toBe(201)
        expected.set(atCap.body.client_id, longest)
        const overCap = yield* admin.post(`${capped.servicePath}/credentials`, { expires_at: new Date(3650 * DAY_MS + 1).toISOString() })
        expect(overCap.status).toBe(400)

        if (fresh === undefined) return
        const exported = yield* exportOf
        const rows = new Map<string, (typeof exported.tables.credentials)[number]>(
          exported.tables.credentials.map((row) => [row.client_id, row])
        )
        for (const [clientId, instant] of expected) {
          const row = rows.get(clientId)!
          expect({ clientId, expires_at: new Date(Date.parse(row.expires_at!)).toISOString() }).toEqual({ clientId, expires_at: instant })
          expect(row.deleted_at !== null).toBe(removed.includes(clientId))
        }
        const reexported = yield* Effect.gen(function*() {
          yield* importDatabase(exported, { merge: false })
          return yield* exportDatabase()
        }).pipe(Effect.provide(fresh()), Effect.scoped)
        expect(reexported.tables.credentials).toEqual(exported.tables.credentials)
        expect(reexported.tables.profiles).toEqual(exported.tables.profiles)
      }))
  })

describe("hostile keys and times (memory)", () => suite(undefined))
describe("hostile keys and times (embedded)", () => suite({ storage: embeddedStorage() }, embeddedClient))
describeWithPostgres("hostile keys and times (PostgreSQL)", () =>
  suite({ storage: isolatedPostgresStorage() }, () =>
    Layer.unwrapScoped(
      Effect.acquireRelease(Effect.promise(freshDatabase), (database) => Effect.promise(database.drop)).pipe(
        Effect.map((database) => Storage.layerMigrated(Storage.layerPostgresClient(Redacted.make(database.url))))
      )
    )))

it("an exported time the API would refuse is refused by an import too", async () => {
  const { StoredTimestamp } = await import("../src/transfer/ExportRows.js")
  const { Schema } = await import("effect")
  const valid = Schema.is(StoredTimestamp)
  expect(valid("9999-12-31T23:59:59.999999Z")).toBe(true)
  expect(valid("2030-01-01T00:00:00.000000+14:00")).toBe(true)
  for (const bad of ["2030-02-30T00:00:00.000000Z", "2030-01-01T24:00:00Z", "10000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"]) {
    expect(valid(bad), bad).toBe(false)
  }
})
