/**
 * Introspection, revocation and the gateway answer the same questions with the same functions
 * (`TokenStanding`, `ClientAuthentication`), so they agree on every state. A seeded random walk over
 * the catalogue and the clock (credentials created with and without an expiry, expired, deleted,
 * a second one added as a rotation does;
 * tokens Bearer and DPoP-bound, revoked by their client; the signing key rotated; services with and
 * without `require_dpop`), and at each state, for each token and credential:
 *
 * - introspection's `active` is the gateway's acceptance for every reason of the token or its
 *   credential (a service that requires DPoP refusing a Bearer token is a reason of the service),
 *   asked by an admin token and by a resource server's credential allowed to introspect the
 *   profile (`introspect_profiles`, client_secret_basic) alike; a credential allowed for other
 *   profiles only is answered `{"active":false}`;
 * - a bound token is introspected as `DPoP` with `cnf.jkt`;
 * - revocation and introspection authenticate exactly the clients the token endpoint authenticates.
 *
 * On the in-memory store, the embedded database and PostgreSQL. `PROPERTY_SEED` replays a run; a
 * failure names its seed.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, type Layer, TestClock } from "effect"
import { accessTokenHash, clientKey, type ClientKey, createService, dpopProof, targetOf } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { decodeJwt, request } from "./support/Http.js"
import { randomOf } from "./support/SeededRandom.js"
import { admin, ADMIN_TOKEN, makeTestServer, send, tokenRequest, type TestStorage } from "../src/testing.js"

const ISSUER = "http://issuer.test"
const FORM = "application/x-www-form-urlencoded"
const RUNS = 16

interface Credential {
  readonly fields: Record<string, string>
  readonly clientId: string
  readonly clientSecret: string
  deleted: boolean
}
interface Token {
  readonly credential: Credential
  readonly accessToken: string
  readonly key: ClientKey | undefined
  readonly path: string
}

const post = (path: string, body: Record<string, string>) =>
  request("POST", path, { body: new URLSearchParams(body).toString(), contentType: FORM })

const introspect = (token: string, authorization = `Bearer ${ADMIN_TOKEN}`) =>
  request("POST", "/oauth/introspect", {
    body: new URLSearchParams({ token }).toString(),
    contentType: FORM,
    headers: { authorization }
  })

/** A resource server's credential (a service of its own), allowed to introspect the tokens of `profiles`. */
const resourceServer = (profiles: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const service = yield* createService()
    const created = yield* admin.post(`${service.servicePath}/credentials`)
    const { client_id, client_secret } = created.body as { client_id: string; client_secret: string }
    const allowed = yield* admin.put(`${service.servicePath}/credentials/${client_id}/introspect_profiles`, {
      introspect_profiles: profiles
    })
    expect(allowed.status).toBe(200)
    return `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString("base64")}`
  })

/** What the gateway does with the token, presented as its holder would. */
const gatewayAccepts = (token: Token) =>
  Effect.gen(function*() {
    const headers: Record<string, string> = { authorization: `Bearer ${token.accessToken}` }
    if (token.key !== undefined) {
      const now = yield* Clock.currentTimeMillis
      headers.authorization = `DPoP ${token.accessToken}`
      headers.dpop = yield* Effect.promise(() =>
        dpopProof(token.key!, `${ISSUER}${token.path}`, now, { ath: accessTokenHash(token.accessToken) })
      )
    }
    const response = yield* send(
      HttpClientRequest.post(token.path).pipe(HttpClientRequest.bodyUnsafeJson({}), HttpClientRequest.setHeaders(headers))
    )
    if (response.status === 200) return true
    expect(response.status).toBe(401)
    // Refused for a reason of the service, not of the token.
    return response.body?.error_description === "This service requires a DPoP-bound access token" ? true : false
  })

const issue = (credential: Credential, path: string, bound: boolean) =>
  Effect.gen(function*() {
    const key = bound ? yield* Effect.promise(() => clientKey("EC")) : undefined
    const now = yield* Clock.currentTimeMillis
    const dpop = key === undefined ? undefined : yield* Effect.promise(() => dpopProof(key, `${ISSUER}/oauth/token`, now))
    const response = yield* tokenRequest(credential.fields, dpop === undefined ? {} : { dpop })
    expect(response.status).toBe(200)
    return { credential, accessToken: response.body.access_token as string, key, path } satisfies Token
  })

/** One random state walk; returns the checks it made, for the coverage assertion. */
const walk = (random: () => number, seed: number) =>
  Effect.gen(function*() {
    const pick = <A>(items: ReadonlyArray<A>) => items[Math.floor(random() * items.length)]!
    const requireDpop = random() < 0.3
    const service = yield* createService(requireDpop ? { require_dpop: true } : {})
    const path = `/service/${service.profile}/${service.environment}/json/${service.uuid}`
    // A resource server allowed for this profile, or (sometimes) for another one only.
    const allowedHere = random() < 0.8
    const rs = yield* resourceServer(allowedHere ? [service.profile, "elsewhere"] : ["elsewhere"])
    const credentials: Array<Credential> = []
    const tokens: Array<Token> = []
    for (let i = 0; i < 1 + Math.floor(random() * 2); i++) {
      const now = yield* Clock.currentTimeMillis
      const expiresAt = random() < 0.5 ? undefined : new Date(now + 5_000 + Math.floor(random() * 60_000)).toISOString()
      const created = yield* admin.post(`${service.servicePath}/credentials`, expiresAt === undefined ? {} : { expires_at: expiresAt })
      expect(created.status).toBe(201)
      const clientId = created.body.client_id as string
      const clientSecret = created.body.client_secret as string
      const credential = {
        fields: { ...targetOf(service), client_id: clientId, client_secret: clientSecret },
        clientId,
        clientSecret,
        deleted: false
      }
      credentials.push(credential)
      for (let j = 0; j < 1 + Math.floor(random() * 2); j++) {
        tokens.push(yield* issue(credential, path, requireDpop || random() < 0.4))
      }
    }

    for (let step = 0; step < 1 + Math.floor(random() * 4); step++) {
      const action = random()
      // Small steps: every background loop of the server runs on TestClock too, so an hour would
      // cost tens of thousands of ticks (a token's own expiry is `verifyAt`'s, shared by all).
      if (action < 0.5) yield* TestClock.adjust(`${Math.floor(random() * 70)} seconds`)
      else if (action < 0.66) {
        const credential = pick(credentials)
        const deleted = yield* admin.delete(`${service.servicePath}/credentials/${credential.clientId}`)
        expect([204, 404]).toContain(deleted.status)
        credential.deleted = true
      } else if (action < 0.85) {
        const token = pick(tokens)
        const { client_id, client_secret } = token.credential.fields
        yield* post("/oauth/revoke", { token: token.accessToken, client_id: client_id!, client_secret: client_secret! })
      } else {
        // 409: the previous rotation's key is not retired yet; the state is then left as it is.
        expect([201, 409]).toContain((yield* admin.post("/admin/keys/rotate")).status)
      }
    }

    let active = 0
    for (const token of tokens) {
      const introspected = yield* introspect(token.accessToken)
      expect(introspected.status).toBe(200)
      const accepted = yield* gatewayAccepts(token)
      const label = `seed ${seed}: token of ${token.credential.clientId} (${token.key === undefined ? "Bearer" : "DPoP"})`
      expect(introspected.body.active, label).toBe(accepted)
      const byClient = yield* introspect(token.accessToken, rs)
      expect(byClient.status, label).toBe(200)
      expect(byClient.body, label).toEqual(allowedHere ? introspected.body : { active: false })
      if (introspected.body.active === true) {
        active++
        const jkt = decodeJwt(token.accessToken).payload.cnf?.jkt
        expect(introspected.body.token_type, label).toBe(jkt === undefined ? "Bearer" : "DPoP")
        expect(introspected.body.cnf, label).toEqual(jkt === undefined ? undefined : { jkt })
      } else {
        expect(introspected.body, label).toEqual({ active: false })
      }
    }

    let authenticated = 0
    for (const credential of credentials) {
      const token = yield* tokenRequest(credential.fields)
      const revoked = yield* post("/oauth/revoke", {
        token: "not-a-token",
        client_id: credential.clientId,
        client_secret: credential.clientSecret
      })
      // The token endpoint authenticated the client unless it answered 401 (a 400 for a service
      // that requires DPoP comes after authentication).
      const label = `seed ${seed}: credential ${credential.clientId}${credential.deleted ? " (deleted)" : ""}`
      expect(revoked.status === 200, label).toBe(token.status !== 401)
      expect([200, 401], label).toContain(revoked.status)
      if (revoked.status === 200) authenticated++
      // Introspection asks the same function: 401 exactly when the token endpoint's is, else 403
      // (the credential was never allowed to introspect).
      const asClient = yield* introspect(
        "not-a-token",
        `Basic ${Buffer.from(`${credential.clientId}:${credential.clientSecret}`).toString("base64")}`
      )
      expect(asClient.status, label).toBe(token.status === 401 ? 401 : 403)
    }
    return { tokens: tokens.length, active, credentials: credentials.length, authenticated }
  })

const agreement = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, keys: "stored" }), { timeout: 120_000 })((it) => {
    it.effect("introspection is the gateway's answer, revocation's client the token endpoint's", () =>
      Effect.gen(function*() {
        const base = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000)
        const seen = { tokens: 0, active: 0, credentials: 0, authenticated: 0 }
        for (let run = 0; run < RUNS; run++) {
          const seed = base + run
          const counts = yield* walk(randomOf(seed), seed)
          for (const k of Object.keys(seen) as Array<keyof typeof seen>) seen[k] += counts[k]
        }
        // Both answers were met (with a fixed number of runs, some of each almost surely).
        expect(seen.active, `seeds ${base}..${base + RUNS - 1}`).toBeGreaterThan(0)
        expect(seen.tokens - seen.active, `seeds ${base}..${base + RUNS - 1}`).toBeGreaterThan(0)
      }), 300_000)

    it.effect("a credential past expires_at: its tokens inactive, and it authenticates at revocation no more", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const now = yield* Clock.currentTimeMillis
        const created = yield* admin.post(`${service.servicePath}/credentials`, { expires_at: new Date(now + 10_000).toISOString() })
        const { client_id, client_secret } = created.body as { client_id: string; client_secret: string }
        const path = `/service/${service.profile}/${service.environment}/json/${service.uuid}`
        const credential = {
          fields: { ...targetOf(service), client_id, client_secret },
          clientId: client_id,
          clientSecret: client_secret,
          deleted: false
        }
        const token = yield* issue(credential, path, false)
        expect((yield* introspect(token.accessToken)).body.active).toBe(true)
        yield* TestClock.adjust("10 seconds")
        expect(yield* gatewayAccepts(token)).toBe(false)
        expect((yield* introspect(token.accessToken)).text).toBe(`{"active":false}`)
        const revoked = yield* post("/oauth/revoke", { token: token.accessToken, client_id, client_secret })
        expect({ status: revoked.status, body: revoked.body }).toEqual({
          status: 401,
          body: { error: "invalid_client", error_description: "Invalid client credentials" }
        })
      }))

    it.effect("a DPoP-bound token is introspected as DPoP with cnf.jkt, nbf only when the token has one", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const created = yield* admin.post(`${service.servicePath}/credentials`)
        const { client_id, client_secret } = created.body as { client_id: string; client_secret: string }
        const path = `/service/${service.profile}/${service.environment}/json/${service.uuid}`
        const credential = {
          fields: { ...targetOf(service), client_id, client_secret },
          clientId: client_id,
          clientSecret: client_secret,
          deleted: false
        }
        const token = yield* issue(credential, path, true)
        const claims = decodeJwt(token.accessToken).payload
        const answer = yield* introspect(token.accessToken)
        expect(answer.text).toBe(JSON.stringify({
          active: true,
          scope: "service:call",
          client_id,
          token_type: "DPoP",
          exp: claims.exp,
          iat: claims.iat,
          ...(claims.nbf === undefined ? {} : { nbf: claims.nbf }),
          sub: client_id,
          aud: claims.aud,
          iss: claims.iss,
          jti: claims.jti,
          cnf: { jkt: claims.cnf.jkt },
          data: claims.data
        }))
        expect(claims.cnf.jkt).toMatch(/^[A-Za-z0-9_-]{43}$/)
      }))
  })

describe("introspection, revocation and the gateway agree (memory)", () => agreement(memoryStorage))
describe("introspection, revocation and the gateway agree (embedded PGlite)", () => agreement(embeddedStorage()))
describeWithPostgres("introspection, revocation and the gateway agree (PostgreSQL)", () => agreement(postgresStorage()))
