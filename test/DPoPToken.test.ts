/**
 * DPoP at `POST /oauth/token` (RFC 9449 §5): a request with a valid proof gets a
 * `DPoP` token carrying `cnf.jkt`; an invalid proof gets `400 invalid_dpop_proof`; without the
 * header, tokens stay Bearer. With secrets and with private_key_jwt, by hand and with oauth4webapi.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as oauth from "oauth4webapi"
import { calculateJwkThumbprint } from "jose"
import { decodeJwt } from "./support/Http.js"
import { admin, makeTestServer, serverPort, tokenRequest } from "../src/testing.js"
import { addKeyCredential, assertion, clientKey, createService, dpopProof, JWT_BEARER, targetOf } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const ISSUER = "http://issuer.test"
const TOKEN_URL = `${ISSUER}/oauth/token`

const secretClient = Effect.gen(function*() {
  const service = yield* createService()
  const credential = yield* admin.post(`${service.servicePath}/credentials`)
  return { service, fields: { ...targetOf(service), client_id: credential.body.client_id, client_secret: credential.body.client_secret } }
})

const proofAt = (
  key: Awaited<ReturnType<typeof clientKey>>,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
  htu = TOKEN_URL
) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => dpopProof(key, htu, now, claims, header)))

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("binds the token to the proof's key: token_type DPoP, cnf.jkt the key's thumbprint", () =>
      Effect.gen(function*() {
        const { fields } = yield* secretClient
        for (const kind of ["EC", "RSA", "Ed25519"] as const) {
          const key = yield* Effect.promise(() => clientKey(kind))
          const response = yield* tokenRequest(fields, { dpop: yield* proofAt(key) })
          expect({ status: response.status, body: response.body }).toEqual({
            status: 200,
            body: { access_token: expect.any(String), token_type: "DPoP", expires_in: 3600, scope: "service:call" }
          })
          expect(response.headers["cache-control"]).toBe("no-store")
          const jkt = yield* Effect.promise(() => calculateJwkThumbprint(key.publicJwk))
          expect(decodeJwt(response.body.access_token).payload.cnf).toEqual({ jkt })
        }
        // without the header: Bearer, no cnf, as before
        const bearer = yield* tokenRequest(fields)
        expect(bearer.body.token_type).toBe("Bearer")
        expect(decodeJwt(bearer.body.access_token).payload.cnf).toBeUndefined()
      }))

    it.effect("binds a private_key_jwt client's token", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("EC"))
        const created = yield* addKeyCredential(service, key.publicJwk)
        const now = yield* Clock.currentTimeMillis
        const jwt = yield* Effect.promise(() => assertion(key, created.body.client_id, ISSUER, {}, now))
        const proofKey = yield* Effect.promise(() => clientKey("Ed25519"))
        const response = yield* tokenRequest(
          { ...targetOf(service), client_assertion_type: JWT_BEARER, client_assertion: jwt },
          { dpop: yield* proofAt(proofKey) }
        )
        expect(response.status).toBe(200)
        expect(response.body.token_type).toBe("DPoP")
      }))

    it.effect("refuses invalid proofs with 400 invalid_dpop_proof", () =>
      Effect.gen(function*() {
        const { fields } = yield* secretClient
        const key = yield* Effect.promise(() => clientKey("EC"))
        const other = yield* Effect.promise(() => clientKey("EC"))
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const replayed = yield* proofAt(key)
        expect((yield* tokenRequest(fields, { dpop: replayed })).status).toBe(200)
        const cases: Record<string, string> = {
          "replayed jti": replayed,
          "wrong htu": yield* proofAt(key, {}, {}, `${ISSUER}/oauth/other`),
          "another host": yield* proofAt(key, {}, {}, "https://elsewhere.example/oauth/token"),
          "wrong htm": yield* proofAt(key, { htm: "GET" }),
          "old iat": yield* proofAt(key, { iat: now - 61 }),
          "future iat": yield* proofAt(key, { iat: now + 61 }),
          "no jti": yield* proofAt(key, { jti: undefined }),
          "wrong typ": yield* proofAt(key, {}, { typ: "JWT" }),
          "no jwk": yield* proofAt(key, {}, { jwk: undefined }),
          "another key's jwk": yield* proofAt(key, {}, { jwk: other.publicJwk }),
          "a private jwk": yield* proofAt(key, {}, { jwk: { ...key.publicJwk, d: "AAAA" } }),
          "not a JWT": "not-a-proof"
        }
        for (const [name, proof] of Object.entries(cases)) {
          const response = yield* tokenRequest(fields, { dpop: proof })
          expect({ name, status: response.status, error: response.body.error }).toEqual({ name, status: 400, error: "invalid_dpop_proof" })
          expect(Object.keys(response.body)).toEqual(["error", "error_description"])
          expect(response.headers["cache-control"]).toBe("no-store")
        }
      }))

    it.effect("client authentication answers before the proof: a wrong secret with a bad proof is 401", () =>
      Effect.gen(function*() {
        const { fields } = yield* secretClient
        const response = yield* tokenRequest({ ...fields, client_secret: "wrong" }, { dpop: "not-a-proof" })
        expect(response.status).toBe(401)
        expect(response.body.error).toBe("invalid_client")
      }))

    it.effect("oauth4webapi's DPoP gets a bound token", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const { fields, service } = yield* secretClient
        const port = yield* serverPort
        const as: oauth.AuthorizationServer = { issuer: ISSUER, token_endpoint: TOKEN_URL }
        const client = { client_id: fields.client_id }
        const keyPair = yield* Effect.promise(() => oauth.generateKeyPair("ES256"))
        const DPoP = oauth.DPoP(client as oauth.Client, keyPair)
        // The proof's htu is the token endpoint under ISSUER; the request goes to the test port.
        const response = yield* Effect.promise(() =>
          oauth.clientCredentialsGrantRequest(
            as,
            client,
            oauth.ClientSecretPost(fields.client_secret),
            { profile: service.profile, environment: service.environment, service_uuid: service.uuid },
            {
              DPoP,
              [oauth.allowInsecureRequests]: true,
              [oauth.customFetch]: (url, init) => fetch(String(url).replace(ISSUER, `http://127.0.0.1:${port}`), init)
            }
          )
        )
        const token = yield* Effect.promise(() => oauth.processClientCredentialsResponse(as, client, response))
        expect(token.token_type).toBe("dpop")
        expect(decodeJwt(token.access_token).payload.cnf).toEqual({ jkt: expect.any(String) })
      }))
  })

describe("DPoP at the token endpoint (memory)", () => suite())
describe("DPoP at the token endpoint (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("DPoP at the token endpoint (PostgreSQL)", () => suite({ storage: postgresStorage() }))
