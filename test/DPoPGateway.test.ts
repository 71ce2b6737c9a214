/**
 * DPoP-bound tokens at the gateway (RFC 9449 §7): accepted only as `Authorization:
 * DPoP` with a proof by the bound key for this call (htm, htu, ath, fresh iat, unseen jti); refused
 * with 401 and the `DPoP` challenge otherwise. Bearer tokens are untouched.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { admin, makeTestServer, send, tokenRequest } from "../src/testing.js"
import { accessTokenHash, clientKey, type ClientKey, createService, dpopProof, targetOf } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const ISSUER = "http://issuer.test"
const ALGS = `algs="RS256 PS256 ES256 EdDSA"`

const boundClient = Effect.gen(function*() {
  const service = yield* createService()
  const credential = yield* admin.post(`${service.servicePath}/credentials`)
  const fields = { ...targetOf(service), client_id: credential.body.client_id, client_secret: credential.body.client_secret }
  const key = yield* Effect.promise(() => clientKey("EC"))
  const now = yield* Clock.currentTimeMillis
  const proof = yield* Effect.promise(() => dpopProof(key, `${ISSUER}/oauth/token`, now))
  const token = yield* tokenRequest(fields, { dpop: proof })
  expect(token.body.token_type).toBe("DPoP")
  const path = `/service/${service.profile}/${service.environment}/json/${service.uuid}`
  return { service, fields, key, path, accessToken: token.body.access_token as string }
})

const callProof = (
  client: { readonly key: ClientKey; readonly path: string; readonly accessToken: string },
  claims: Record<string, unknown> = {},
  key = client.key
) =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => Effect.promise(() => dpopProof(key, `${ISSUER}${client.path}`, now, { ath: accessTokenHash(client.accessToken), ...claims }))
  )

const call = (path: string, headers: Record<string, string>) =>
  send(HttpClientRequest.post(path).pipe(HttpClientRequest.bodyUnsafeJson({ hello: "world" }), HttpClientRequest.setHeaders(headers)))

const expectRefused = (
  response: { status: number; headers: Record<string, string>; body: any },
  error: "invalid_token" | "invalid_dpop_proof"
) => {
  expect({ status: response.status, error: response.body?.error, challenge: response.headers["www-authenticate"] }).toEqual({
    status: 401,
    error,
    challenge: `DPoP realm="service", error="${error}", ${ALGS}`
  })
  expect(Object.keys(response.body)).toEqual(["error", "error_description"])
}

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("accepts a bound token as DPoP with a valid proof, once per proof", () =>
      Effect.gen(function*() {
        const client = yield* boundClient
        const proof = yield* callProof(client)
        const ok = yield* call(client.path, { authorization: `DPoP ${client.accessToken}`, dpop: proof })
        expect(ok.status).toBe(200)
        expect(ok.body.client_id).toBe(client.fields.client_id)
        // the same proof again: its jti was seen
        expectRefused(yield* call(client.path, { authorization: `DPoP ${client.accessToken}`, dpop: proof }), "invalid_dpop_proof")
        // a fresh proof works again
        expect((yield* call(client.path, { authorization: `DPoP ${client.accessToken}`, dpop: yield* callProof(client) })).status).toBe(200)
      }))

    it.effect("refuses a bound token presented as Bearer, or without a proof", () =>
      Effect.gen(function*() {
        const client = yield* boundClient
        expectRefused(
          yield* call(client.path, { authorization: `Bearer ${client.accessToken}`, dpop: yield* callProof(client) }),
          "invalid_token"
        )
        expectRefused(yield* call(client.path, { authorization: `Bearer ${client.accessToken}` }), "invalid_token")
        expectRefused(yield* call(client.path, { authorization: `DPoP ${client.accessToken}` }), "invalid_dpop_proof")
      }))

    it.effect("refuses proofs with the wrong htu, htm, ath, iat, or by another key", () =>
      Effect.gen(function*() {
        const client = yield* boundClient
        const other = yield* Effect.promise(() => clientKey("EC"))
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const cases: Record<string, string> = {
          "wrong htu": yield* callProof(client, { htu: `${ISSUER}/service/other/production/json/${client.service.uuid}` }),
          "the token endpoint's htu": yield* callProof(client, { htu: `${ISSUER}/oauth/token` }),
          "wrong htm": yield* callProof(client, { htm: "GET" }),
          "wrong ath": yield* callProof(client, { ath: accessTokenHash("another token") }),
          "no ath": yield* callProof(client, { ath: undefined }),
          "old iat": yield* callProof(client, { iat: now - 120 }),
          "another key": yield* callProof(client, {}, other)
        }
        for (const [name, proof] of Object.entries(cases)) {
          const response = yield* call(client.path, { authorization: `DPoP ${client.accessToken}`, dpop: proof })
          expect({ name, status: response.status }).toEqual({ name, status: 401 })
          expectRefused(response, "invalid_dpop_proof")
        }
      }))

    it.effect("refuses an unbound token presented as DPoP; Bearer tokens answer as before", () =>
      Effect.gen(function*() {
        const client = yield* boundClient
        const bearer = yield* tokenRequest(client.fields)
        expect(bearer.body.token_type).toBe("Bearer")
        const asDpop = yield* call(client.path, {
          authorization: `DPoP ${bearer.body.access_token}`,
          dpop: yield* callProof({ ...client, accessToken: bearer.body.access_token })
        })
        expectRefused(asDpop, "invalid_token")
        const ok = yield* call(client.path, { authorization: `Bearer ${bearer.body.access_token}` })
        expect(ok.status).toBe(200)
        const missing = yield* call(client.path, {})
        expect(missing.headers["www-authenticate"]).toBe(`Bearer realm="service"`)
      }))

    it.effect("refuses an expired bound token, or one for another service, with the DPoP challenge", () =>
      Effect.gen(function*() {
        const client = yield* boundClient
        const other = yield* boundClient
        const forOther = yield* call(client.path, {
          authorization: `DPoP ${other.accessToken}`,
          dpop: yield* callProof({ ...client, accessToken: other.accessToken }, {}, other.key)
        })
        expectRefused(forOther, "invalid_token")
        yield* TestClock.adjust("3600 seconds")
        const expired = yield* call(client.path, { authorization: `DPoP ${client.accessToken}`, dpop: yield* callProof(client) })
        expectRefused(expired, "invalid_token")
      }))
  })

describe("DPoP at the gateway (memory)", () => suite())
describe("DPoP at the gateway (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("DPoP at the gateway (PostgreSQL)", () => suite({ storage: postgresStorage() }))
