/**
 * `private_key_jwt` at `POST /oauth/token` (RFC 7523): a key credential's client
 * authenticates with a JWT it signed, through oauth4webapi and by hand, and every refusal answers
 * `401 invalid_client "Invalid client credentials"`, followed by its reason when that reveals no
 * secret (audience, lifetime, algorithm, replay), and always logged at debug (two methods at once:
 * `400 invalid_request`). A replayed `jti` is refused on another instance sharing PostgreSQL.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Logger, LogLevel, TestClock } from "effect"
import * as oauth from "oauth4webapi"
import { exportJWK, exportSPKI, importJWK } from "jose"
import { decodeJwt, oauthError, request } from "./support/Http.js"
import { admin, makeTestServer, serverPort, tokenRequest } from "../src/testing.js"
import {
  addKeyCredential,
  assertion,
  clientKey,
  type ClientKey,
  createService,
  hmacJwt,
  JWT_BEARER,
  type KeyKind,
  type ServiceFixture,
  targetOf,
  unsignedJwt
} from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"

const ISSUER = "http://issuer.test"
const FORM = "application/x-www-form-urlencoded"
const INVALID_CLIENT = oauthError("invalid_client", "Invalid client credentials")
const TWO_METHODS = { error: "invalid_request", error_description: "Use exactly one client authentication method" }

interface KeyClient {
  readonly service: ServiceFixture
  readonly key: ClientKey
  readonly clientId: string
}

const keyClient = (kind: KeyKind = "EC") =>
  Effect.gen(function*() {
    const service = yield* createService()
    const key = yield* Effect.promise(() => clientKey(kind))
    const created = yield* addKeyCredential(service, key.publicJwk)
    expect(created.status).toBe(201)
    return { service, key, clientId: created.body.client_id as string }
  })

const withAssertion = (client: KeyClient, jwt: string, extra: Record<string, string> = {}) =>
  tokenRequest({ ...targetOf(client.service), client_assertion_type: JWT_BEARER, client_assertion: jwt, ...extra })

/** An assertion on the server's clock (the TestClock). */
const signed = (client: KeyClient, claims: Record<string, unknown> = {}, audience: unknown = ISSUER, key = client.key) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.promise(() => assertion(key, client.clientId, audience, claims, now)))

const nowSeconds = Effect.map(Clock.currentTimeMillis, (millis) => Math.floor(millis / 1000))

const expectRefused = (response: { status: number; body: unknown; headers: Record<string, string> }) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 401, body: INVALID_CLIENT })
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["www-authenticate"]).toBeUndefined()
}

/** A replayed `jti`: refused, saying so (the caller signed it, so nothing is revealed). */
const REPLAYED = oauthError(
  "invalid_client",
  "Invalid client credentials: the assertion's jti was used before (each assertion needs a new jti)"
)
const expectReplayed = (response: { status: number; body: unknown; headers: Record<string, string> }) => {
  expect({ status: response.status, body: response.body }).toEqual({ status: 401, body: REPLAYED })
  expect(response.headers["cache-control"]).toBe("no-store")
}

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.effect("issues Bearer tokens to RSA (RS256, PS256), EC and Ed25519 key credentials, with or without client_id", () =>
      Effect.gen(function*() {
        for (const [kind, alg] of [["RSA", "RS256"], ["RSA", "PS256"], ["EC", "ES256"], ["Ed25519", "EdDSA"]] as const) {
          const client = yield* keyClient(kind)
          // A WebCrypto key signs with one algorithm: PS256 needs the RSA key imported for RSA-PSS.
          const privateKey = alg === "PS256"
            ? yield* Effect.promise(async () => importJWK(await exportJWK(client.key.privateKey), "PS256") as Promise<CryptoKey>)
            : client.key.privateKey
          const jwt = yield* signed(client, {}, ISSUER, { ...client.key, alg, privateKey } as ClientKey)
          const response = yield* withAssertion(client, jwt, alg === "PS256" ? { client_id: client.clientId } : {})
          expect({ status: response.status, body: response.body }).toEqual({
            status: 200,
            body: { access_token: expect.any(String), token_type: "Bearer", expires_in: 3600, scope: "service:call" }
          })
          expect(response.headers["cache-control"]).toBe("no-store")
          const claims = decodeJwt(response.body.access_token).payload
          expect(claims).toMatchObject({ sub: client.clientId, client_id: client.clientId })
          expect(claims.cnf).toBeUndefined()
          const listed = yield* admin.get(`${client.service.servicePath}/credentials`)
          expect(listed.body.credentials[0].last_used_at).toEqual(expect.any(String))
        }
      }))

    it.effect("accepts aud as a one-element array, and iat/nbf up to 10 s ahead", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("RSA")
        const now = yield* nowSeconds
        expect((yield* withAssertion(client, yield* signed(client, {}, [ISSUER]))).status).toBe(200)
        expect((yield* withAssertion(client, yield* signed(client, { iat: now + 8, nbf: now + 8 }))).status).toBe(200)
      }))

    it.effect("refuses every bad assertion with 401 invalid_client", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("EC")
        const other = yield* keyClient("EC")
        const now = yield* nowSeconds
        const claims = { iss: client.clientId, sub: client.clientId, aud: ISSUER, jti: "x", iat: now, exp: now + 60 }
        const pem = yield* Effect.promise(async () => exportSPKI(await importJWK(client.key.publicJwk, "ES256") as CryptoKey))
        const aud = `the assertion's aud must be the issuer identifier "${ISSUER}"`
        // Each refusal with its reason once the signature verified (or the algorithm is not the key's),
        // the fixed answer alone when the key did not sign it.
        const cases: Record<string, readonly [string, string | undefined]> = {
          "wrong aud": [yield* signed(client, {}, "https://elsewhere.example"), aud],
          "the token endpoint URL as aud": [yield* signed(client, {}, `${ISSUER}/oauth/token`), `${aud}, not the token endpoint's URL`],
          "the issuer with a trailing slash": [yield* signed(client, {}, `${ISSUER}/`), `${aud}, without a trailing slash`],
          "aud with the issuer and another": [yield* signed(client, {}, [ISSUER, "https://elsewhere.example"]), `${aud}, alone`],
          "no aud": [yield* signed(client, { aud: undefined }), `the assertion has no aud; ${aud}`],
          expired: [yield* signed(client, { iat: now - 120, exp: now - 1 }), "the assertion has expired (exp is past)"],
          "exp more than 5 minutes ahead": [
            yield* signed(client, { exp: now + 600 }),
            "the assertion's exp is more than 300 seconds ahead"
          ],
          "no exp": [yield* signed(client, { exp: undefined }), "the assertion has no exp"],
          "no jti": [yield* signed(client, { jti: undefined }), "the assertion has no jti"],
          "iat 30 s ahead": [
            yield* signed(client, { iat: now + 30 }),
            "the assertion's iat is more than 10 seconds ahead (is the client's clock fast?)"
          ],
          "nbf 30 s ahead": [
            yield* signed(client, { nbf: now + 30 }),
            "the assertion's nbf is more than 10 seconds ahead (is the client's clock fast?)"
          ],
          "iss not the client": [yield* signed(client, { iss: other.clientId }), undefined],
          "sub not the client": [yield* signed(client, { sub: other.clientId }), "the assertion's sub must be the client id"],
          "alg none": [unsignedJwt(claims), `the assertion's alg "none" is not allowed for this key (ES256)`],
          "HS256 with the public key as secret": [hmacJwt(claims, pem), `the assertion's alg "HS256" is not allowed for this key (ES256)`],
          "HS256 with the JWK as secret": [
            hmacJwt(claims, JSON.stringify(client.key.publicJwk)),
            `the assertion's alg "HS256" is not allowed for this key (ES256)`
          ],
          "another credential's key": [yield* signed(client, {}, ISSUER, other.key), undefined],
          "not a JWT": ["not-a-jwt", undefined]
        }
        for (const [name, [jwt, reason]] of Object.entries(cases)) {
          const response = yield* withAssertion(client, jwt)
          const body = reason === undefined ? INVALID_CLIENT : oauthError("invalid_client", `Invalid client credentials: ${reason}`)
          expect({ name, status: response.status, body: response.body }).toEqual({ name, status: 401, body })
        }
        // client_id sent that is not the assertion's; another assertion type
        expectRefused(yield* withAssertion(client, yield* signed(client), { client_id: other.clientId }))
        expectRefused(
          yield* tokenRequest({
            ...targetOf(client.service),
            client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:saml2-bearer",
            client_assertion: yield* signed(client)
          })
        )
        // a secret for a key credential (its verifier is no digest)
        expectRefused(yield* tokenRequest({ ...targetOf(client.service), client_id: client.clientId, client_secret: "a".repeat(43) }))
        // still issues afterwards
        expect((yield* withAssertion(client, yield* signed(client))).status).toBe(200)
      }))

    it.effect("refuses a replayed jti", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("Ed25519")
        const jwt = yield* signed(client)
        expect((yield* withAssertion(client, jwt)).status).toBe(200)
        expectReplayed(yield* withAssertion(client, jwt))
        // the same jti in a new assertion too
        const jti = decodeJwt(jwt).payload.jti
        expectReplayed(yield* withAssertion(client, yield* signed(client, { jti })))
      }))

    it.effect("revokes its token at /oauth/revoke with an assertion; a replayed one or a secret is 401 there too", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("EC")
        const token = (yield* withAssertion(client, yield* signed(client))).body.access_token as string
        const { profile, environment, uuid } = client.service
        const call = () =>
          request("POST", `/service/${profile}/${environment}/json/${uuid}`, {
            body: "{}",
            contentType: "application/json",
            headers: { authorization: `Bearer ${token}` }
          })
        const revoke = (fields: Record<string, string>) =>
          request("POST", "/oauth/revoke", { body: new URLSearchParams({ token, ...fields }).toString(), contentType: FORM })
        expect((yield* call()).status).toBe(200)
        const jwt = yield* signed(client)
        const revoked = yield* revoke({ client_assertion_type: JWT_BEARER, client_assertion: jwt })
        expect({ status: revoked.status, text: revoked.text }).toEqual({ status: 200, text: "" })
        expect((yield* call()).body).toEqual(oauthError("invalid_token", "The access token has been revoked"))
        // The same assertion again (saying so), and a secret for a key credential: the token endpoint's 401.
        const replayed = yield* revoke({ client_assertion_type: JWT_BEARER, client_assertion: jwt })
        expect({ status: replayed.status, body: replayed.body }).toEqual({ status: 401, body: REPLAYED })
        const secret = yield* revoke({ client_id: client.clientId, client_secret: "x".repeat(43) })
        expect({ status: secret.status, body: secret.body }).toEqual({ status: 401, body: INVALID_CLIENT })
      }))

    it.effect("refuses an assertion for a secret credential", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const secret = yield* admin.post(`${service.servicePath}/credentials`)
        const key = yield* Effect.promise(() => clientKey("EC"))
        const client = { service, key, clientId: secret.body.client_id }
        expectRefused(yield* withAssertion(client, yield* signed(client)))
      }))

    it.effect("two methods at once → 400 invalid_request; an assertion without its type → the missing-parameter answer", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("EC")
        const jwt = yield* signed(client)
        const withSecret = yield* withAssertion(client, jwt, { client_id: client.clientId, client_secret: "secret" })
        expect({ status: withSecret.status, body: withSecret.body }).toEqual({ status: 400, body: TWO_METHODS })
        const basic = `Basic ${Buffer.from(`${client.clientId}:secret`).toString("base64")}`
        const withBasic = yield* tokenRequest(
          { ...targetOf(client.service), client_assertion_type: JWT_BEARER, client_assertion: jwt },
          { authorization: basic }
        )
        expect({ status: withBasic.status, body: withBasic.body }).toEqual({ status: 400, body: TWO_METHODS })
        const untyped = yield* tokenRequest({ ...targetOf(client.service), client_assertion: jwt })
        expect({ status: untyped.status, body: untyped.body }).toEqual({
          status: 400,
          body: oauthError("invalid_request", "Missing required parameters")
        })
        // the seed's order: an unsupported grant type answers before authentication
        const unsupported = yield* withAssertion(client, jwt, { grant_type: "password" })
        expect(unsupported.status).toBe(400)
        expect(unsupported.body.error).toBe("unsupported_grant_type")
      }))

    it.effect("a deleted key credential is refused", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("RSA")
        expect((yield* admin.delete(`${client.service.servicePath}/credentials/${client.clientId}`)).status).toBe(204)
        expectRefused(yield* withAssertion(client, yield* signed(client)))
      }))

    it.effect("oauth4webapi's private_key_jwt obtains a token", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("EC")
        const port = yield* serverPort
        // oauth4webapi signs on the real clock: the server's is set to it just before (setting up the
        // client may take longer than the assertion's 10 s of allowed skew on a busy machine)
        yield* TestClock.setTime(Date.now())
        const as: oauth.AuthorizationServer = { issuer: ISSUER, token_endpoint: `http://127.0.0.1:${port}/oauth/token` }
        const response = yield* Effect.promise(() =>
          oauth.clientCredentialsGrantRequest(
            as,
            { client_id: client.clientId },
            oauth.PrivateKeyJwt(client.key.privateKey),
            { profile: client.service.profile, environment: client.service.environment, service_uuid: client.service.uuid },
            { [oauth.allowInsecureRequests]: true }
          )
        )
        const token = yield* Effect.promise(() => oauth.processClientCredentialsResponse(as, { client_id: client.clientId }, response))
        expect(token.token_type).toBe("bearer")
        expect(decodeJwt(token.access_token).payload.sub).toBe(client.clientId)
      }))
  })

describe("private_key_jwt (memory)", () => suite())
describe("private_key_jwt (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("private_key_jwt (PostgreSQL)", () => suite({ storage: postgresStorage() }))

describeWithPostgres("private_key_jwt: a jti is seen by every instance sharing PostgreSQL", () => {
  const instance = () => Layer.build(makeTestServer({ storage: postgresStorage() }))
  layer(Layer.empty, { timeout: 60_000 })((it) => {
    it.scoped("an assertion accepted by one instance is refused by the other", () =>
      Effect.gen(function*() {
        const first = yield* instance()
        const second = yield* instance()
        const on = <A, E>(context: Context.Context<any>, effect: Effect.Effect<A, E, any>) =>
          Effect.provide(effect, context) as Effect.Effect<A, E>
        const client = yield* on(first, keyClient("EC"))
        const jwt = yield* signed(client)
        expect((yield* on(first, withAssertion(client, jwt))).status).toBe(200)
        expectReplayed(yield* on(second, withAssertion(client, jwt)))
        const another = yield* signed(client)
        expect((yield* on(second, withAssertion(client, another))).status).toBe(200)
        expectReplayed(yield* on(first, withAssertion(client, another)))
      }))
  })
})

describe("private_key_jwt: every refusal's reason is logged at debug, never the assertion", () => {
  const logged: Array<string> = []
  const capture = Layer.merge(
    Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void logged.push(String(message)))),
    Logger.minimumLogLevel(LogLevel.Debug)
  )
  layer(makeTestServer().pipe(Layer.provide(capture)), { timeout: 120_000 })((it) => {
    it.effect("a wrong key (answered without reason) and a wrong aud are both logged with the client id", () =>
      Effect.gen(function*() {
        const client = yield* keyClient("EC")
        const other = yield* keyClient("EC")
        const wrongKey = yield* signed(client, {}, ISSUER, other.key)
        expectRefused(yield* withAssertion(client, wrongKey))
        const endpoint = yield* signed(client, {}, `${ISSUER}/oauth/token`)
        expect((yield* withAssertion(client, endpoint)).status).toBe(401)
        const lines = logged.filter((line) => line.startsWith(`client assertion of ${client.clientId} refused`))
        expect(lines).toEqual([
          `client assertion of ${client.clientId} refused: the assertion's signature does not verify with the credential's key`,
          `client assertion of ${client.clientId} refused: the assertion's aud must be the issuer identifier "${ISSUER}", ` +
          "not the token endpoint's URL"
        ])
        expect(logged.join("\n")).not.toContain(wrongKey)
        expect(logged.join("\n")).not.toContain(endpoint)
      }))
  })
})
