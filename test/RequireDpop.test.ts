/**
 * Services with `"require_dpop": true`, through the real HttpApi on every storage:
 * the token endpoint issues them only DPoP-bound tokens (a request without a proof, once the client
 * authenticated: `400 invalid_request`), and the gateway refuses Bearer tokens for them with the
 * DPoP challenge; both entries (the fast lane, and the app for a chunked body) answer the same. The
 * flag round-trips through the admin API and the audit trail, and a service without it answers as
 * it always did.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { admin, makeTestServer, send, tokenRequest } from "../src/testing.js"
import { callThroughApp } from "./support/AppEntry.js"
import {
  accessTokenHash,
  addKeyCredential,
  assertion,
  clientKey,
  type ClientKey,
  createService,
  dpopProof,
  JWT_BEARER,
  type ServiceFixture,
  targetOf
} from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"
import { formEncode, oauthError, unknownClientId } from "./support/Http.js"

const ISSUER = "http://issuer.test"
const ALGS = `algs="RS256 PS256 ES256 EdDSA"`
const DPOP_REQUIRED = oauthError("invalid_request", "This service requires a DPoP proof")
const FORM = "application/x-www-form-urlencoded"

const form = (fields: Record<string, string>) =>
  Object.entries(fields).map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")

/** A service with a secret credential, `require_dpop` set as given. */
const secretClient = (requireDpop: boolean) =>
  Effect.gen(function*() {
    const service = yield* createService(requireDpop ? { require_dpop: true } : {})
    const credential = yield* admin.post(`${service.servicePath}/credentials`)
    expect(credential.status).toBe(201)
    const fields = { ...targetOf(service), client_id: credential.body.client_id, client_secret: credential.body.client_secret }
    const path = `/service/${service.profile}/${service.environment}/json/${service.uuid}`
    return { service, fields, path, clientId: credential.body.client_id as string }
  })

const tokenProof = (key: ClientKey) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => dpopProof(key, `${ISSUER}/oauth/token`, now)))

const callProof = (key: ClientKey, path: string, accessToken: string) =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => Effect.promise(() => dpopProof(key, `${ISSUER}${path}`, now, { ath: accessTokenHash(accessToken) }))
  )

const call = (path: string, headers: Record<string, string>) =>
  send(HttpClientRequest.post(path).pipe(HttpClientRequest.bodyUnsafeJson({ hello: "world" }), HttpClientRequest.setHeaders(headers)))

/** The token request through the HttpApi app: a chunked body is never the fast lane's. */
const tokenThroughApp = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  callThroughApp("/oauth/token", undefined, { "content-type": FORM, ...headers }, form(fields))

const expectDpopRequired = (response: { status: number; headers: Record<string, string>; body: unknown; text: string }) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 400, body: DPOP_REQUIRED })
  expect(Object.keys(response.body as object)).toEqual(["error", "error_description"])
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["www-authenticate"]).toBeUndefined()
}

const BEARER_REFUSED = {
  status: 401,
  challenge: `DPoP realm="service", error="invalid_token", ${ALGS}`,
  body: { error: "invalid_token", error_description: "This service requires a DPoP-bound access token" }
}

const refusal = (response: { status: number; headers: Record<string, string>; body: unknown }) => ({
  status: response.status,
  challenge: response.headers["www-authenticate"],
  body: response.body
})

const setRequireDpop = (service: ServiceFixture, requireDpop: boolean | undefined) =>
  admin.put(service.servicePath, {
    name: "billing",
    auth_type: "oauth",
    ...(requireDpop === undefined ? {} : { require_dpop: requireDpop })
  })

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("the flag round-trips through POST, GET and PUT, and is absent from services without it", () =>
      Effect.gen(function*() {
        const plain = yield* createService()
        const shown = yield* admin.get(plain.servicePath)
        expect(Object.keys(shown.body)).toEqual(["uuid", "name", "auth_type", "handler", "credentials"])

        const strict = yield* createService({ require_dpop: true })
        expect((yield* admin.get(strict.servicePath)).body.require_dpop).toBe(true)
        const off = yield* setRequireDpop(strict, false)
        expect({ status: off.status, keys: Object.keys(off.body) }).toEqual({
          status: 200,
          keys: ["uuid", "name", "auth_type", "handler", "credentials"]
        })
        const on = yield* setRequireDpop(strict, true)
        expect({ status: on.status, flag: on.body.require_dpop }).toEqual({ status: 200, flag: true })
        // A PUT replaces it, like the rate limit: left out, it is off.
        expect(Object.keys((yield* setRequireDpop(strict, undefined)).body)).not.toContain("require_dpop")
        // The profile document shows it too.
        yield* setRequireDpop(strict, true)
        const profile = yield* admin.get(`/admin/profiles/${strict.profile}`)
        expect(profile.body.environments[0].services[0].require_dpop).toBe(true)

        for (const bad of ["yes", 1, null]) {
          const refused = yield* admin.put(strict.servicePath, { name: "billing", auth_type: "oauth", require_dpop: bad })
          expect({ bad, status: refused.status, error: refused.body?.error }).toEqual({ bad, status: 400, error: "invalid_request" })
        }
        expect((yield* admin.get(strict.servicePath)).body.require_dpop).toBe(true)
      }))

    it.effect("the audit trail records the flag when set, and a change of it is a service.changed", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        yield* setRequireDpop(service, true)
        yield* setRequireDpop(service, true)
        yield* setRequireDpop(service, false)
        const trail = yield* admin.get(`/admin/audit?profile=${service.profile}&limit=50`)
        const changes = (trail.body.events as Array<{ action: string; details: Record<string, unknown> | null }>)
          .filter((event) => event.action.startsWith("service."))
          .reverse()
          .map((event) => ({ action: event.action, require_dpop: event.details?.require_dpop }))
        expect(changes).toEqual([
          { action: "service.created", require_dpop: undefined },
          { action: "service.changed", require_dpop: true },
          { action: "service.changed", require_dpop: undefined }
        ])
      }))

    it.effect("token endpoint: without a proof 400 invalid_request, after client authentication; with one a DPoP token", () =>
      Effect.gen(function*() {
        const client = yield* secretClient(true)
        expectDpopRequired(yield* tokenRequest(client.fields))
        expectDpopRequired(yield* tokenThroughApp(client.fields))
        // Client authentication first: an unknown client or a wrong secret is still invalid_client.
        const invalidClient = { status: 401, body: oauthError("invalid_client", "Invalid client credentials") }
        const unknown = yield* tokenRequest({ ...client.fields, client_id: unknownClientId() })
        expect({ status: unknown.status, body: unknown.body }).toEqual(invalidClient)
        const wrong = yield* tokenRequest({ ...client.fields, client_secret: "wrong" })
        expect({ status: wrong.status, body: wrong.body }).toEqual(invalidClient)
        // An invalid proof is invalid_dpop_proof, as on any service.
        const badProof = yield* tokenRequest(client.fields, { dpop: "not-a-proof" })
        expect({ status: badProof.status, error: badProof.body.error }).toEqual({ status: 400, error: "invalid_dpop_proof" })

        const key = yield* Effect.promise(() => clientKey("EC"))
        for (
          const issued of [
            yield* tokenRequest(client.fields, { dpop: yield* tokenProof(key) }),
            yield* tokenThroughApp(client.fields, { dpop: yield* tokenProof(key) })
          ]
        ) {
          expect({ status: issued.status, type: issued.body.token_type }).toEqual({ status: 200, type: "DPoP" })
        }
      }))

    it.effect("token endpoint: private_key_jwt without a proof 400 invalid_request, with one a DPoP token", () =>
      Effect.gen(function*() {
        const service = yield* createService({ require_dpop: true })
        const key = yield* Effect.promise(() => clientKey("Ed25519"))
        const created = yield* addKeyCredential(service, key.publicJwk)
        const clientId: string = created.body.client_id
        const fields = (jwt: string) => ({ ...targetOf(service), client_assertion_type: JWT_BEARER, client_assertion: jwt })
        const signed = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => assertion(key, clientId, ISSUER, {}, now)))
        expectDpopRequired(yield* tokenRequest(fields(yield* signed)))
        // A refused assertion stays invalid_client.
        const other = yield* Effect.promise(() => clientKey("Ed25519"))
        const forged = yield* Effect.flatMap(
          Clock.currentTimeMillis,
          (now) => Effect.promise(() => assertion(other, clientId, ISSUER, {}, now))
        )
        expect((yield* tokenRequest(fields(forged))).body.error).toBe("invalid_client")
        const issued = yield* tokenRequest(fields(yield* signed), { dpop: yield* tokenProof(key) })
        expect({ status: issued.status, type: issued.body.token_type }).toEqual({ status: 200, type: "DPoP" })
      }))

    it.effect("gateway: a Bearer token is refused 401 with the DPoP challenge on both entries; a DPoP call passes", () =>
      Effect.gen(function*() {
        const client = yield* secretClient(false)
        const bearer = yield* tokenRequest(client.fields)
        expect(bearer.body.token_type).toBe("Bearer")
        const token: string = bearer.body.access_token
        expect((yield* call(client.path, { authorization: `Bearer ${token}` })).status).toBe(200)

        yield* setRequireDpop(client.service, true)
        expect(refusal(yield* call(client.path, { authorization: `Bearer ${token}` }))).toEqual(BEARER_REFUSED)
        expect(refusal(yield* callThroughApp(client.path, token))).toEqual(BEARER_REFUSED)
        // Presented as DPoP, an unbound token is refused as on any service.
        const key = yield* Effect.promise(() => clientKey("EC"))
        const asDpop = yield* call(client.path, { authorization: `DPoP ${token}`, dpop: yield* callProof(key, client.path, token) })
        expect(refusal(asDpop)).toEqual({
          ...BEARER_REFUSED,
          body: { error: "invalid_token", error_description: "The access token is not bound to a DPoP key" }
        })
        // No credentials: the challenge names DPoP.
        const none = yield* call(client.path, {})
        expect({ status: none.status, challenge: none.headers["www-authenticate"], error: none.body.error }).toEqual({
          status: 401,
          challenge: `DPoP realm="service", ${ALGS}`,
          error: "invalid_token"
        })
        // An invalid token: refused with the DPoP challenge too.
        const invalid = yield* call(client.path, { authorization: `Bearer ${token}x` })
        expect({ status: invalid.status, challenge: invalid.headers["www-authenticate"] }).toEqual({
          status: 401,
          challenge: `DPoP realm="service", error="invalid_token", ${ALGS}`
        })

        const bound = yield* tokenRequest(client.fields, { dpop: yield* tokenProof(key) })
        const boundToken: string = bound.body.access_token
        const ok = yield* call(client.path, { authorization: `DPoP ${boundToken}`, dpop: yield* callProof(key, client.path, boundToken) })
        expect({ status: ok.status, client: ok.body.client_id }).toEqual({ status: 200, client: client.clientId })
        const viaApp = yield* callThroughApp(client.path, undefined, {
          authorization: `DPoP ${boundToken}`,
          dpop: yield* callProof(key, client.path, boundToken)
        })
        expect(viaApp.status).toBe(200)
        // A bound token as Bearer: refused as on any service.
        expect(refusal(yield* call(client.path, { authorization: `Bearer ${boundToken}` })).challenge)
          .toBe(`DPoP realm="service", error="invalid_token", ${ALGS}`)

        // Turned off again: Bearer tokens pass once more.
        yield* setRequireDpop(client.service, false)
        expect((yield* call(client.path, { authorization: `Bearer ${token}` })).status).toBe(200)
      }))

    it.effect("a service without the flag answers a Bearer token and a missing one as before", () =>
      Effect.gen(function*() {
        const client = yield* secretClient(false)
        const bearer = yield* tokenRequest(client.fields)
        expect(bearer.body.token_type).toBe("Bearer")
        expect((yield* call(client.path, { authorization: `Bearer ${bearer.body.access_token}` })).status).toBe(200)
        const none = yield* call(client.path, {})
        expect({ status: none.status, challenge: none.headers["www-authenticate"] }).toEqual({
          status: 401,
          challenge: `Bearer realm="service"`
        })
      }))
  })

describe("require_dpop (memory)", () => suite())
describe("require_dpop (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("require_dpop (PostgreSQL)", () => suite({ storage: postgresStorage() }))
