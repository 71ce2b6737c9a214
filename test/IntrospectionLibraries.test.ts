/**
 * A resource server introspects and a client revokes with standard libraries, unmodified, each with
 * its own client authentication: openid-client's `tokenIntrospection` and `tokenRevocation`,
 * oauth4webapi's `introspectionRequest` + `processIntrospectionResponse` and `revocationRequest` +
 * `processRevocationResponse`, through the real HttpApi on a real port. Requests go to the test
 * port; the URLs the clients sign (`aud`) are under the issuer, as in production. Each refusal is
 * read as the library reports it: wrong secret, unknown client, not allowed, another profile's token,
 * expired and deleted credentials, Bearer and client authentication at once.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as oauth from "oauth4webapi"
import * as client from "openid-client"
import { addKeyCredential, clientKey } from "./support/ClientKeys.js"
import { admin, ADMIN_TOKEN, createFixture, type Fixture, fixtureOf, issueToken, makeTestServer, serverPort } from "../src/testing.js"
import { TEST_ISSUER } from "./support/Tokens.js"

const ISSUER = TEST_ISSUER
const METADATA: oauth.AuthorizationServer = {
  issuer: ISSUER,
  token_endpoint: `${ISSUER}/oauth/token`,
  introspection_endpoint: `${ISSUER}/oauth/introspect`,
  revocation_endpoint: `${ISSUER}/oauth/revoke`
}

const allow = (servicePath: string, clientId: string, profiles: ReadonlyArray<string>) =>
  Effect.map(admin.put(`${servicePath}/credentials/${clientId}/introspect_profiles`, { introspect_profiles: profiles }), (r) => {
    expect(r.status).toBe(200)
  })

/**
 * What a library's rejection says: the HTTP status and the OAuth error code, from the error's own
 * members, or (a 401 with a challenge, which both libraries raise as a challenge error) from the
 * answer's body.
 */
const refusalOf = async (error: unknown) => {
  const e = error as { status?: number; error?: string; response?: Response; cause?: { status?: number; error?: string } }
  const status = e.status ?? e.response?.status ?? e.cause?.status
  const code = e.error ?? e.cause?.error ??
    (e.response !== undefined && !e.response.bodyUsed ? ((await e.response.json()) as { error?: string }).error : undefined)
  return { status, error: code }
}
const refused = <A>(run: () => Promise<A>) => Effect.promise(() => run().then((value) => ({ resolved: value }), refusalOf))

const toPort = (port: number) => (url: string, options: unknown) =>
  fetch(url.replace(ISSUER, `http://127.0.0.1:${port}`), options as RequestInit)

/** openid-client's configuration of a credential, with a secret (Basic or post) or a key (private_key_jwt). */
const openidConfig = (
  port: number,
  clientId: string,
  auth: { readonly method: "client_secret_basic" | "client_secret_post"; readonly secret: string } | {
    readonly method: "private_key_jwt"
    readonly key: CryptoKey
  }
) => {
  const config = new client.Configuration(
    METADATA,
    clientId,
    { token_endpoint_auth_method: auth.method },
    auth.method === "private_key_jwt"
      ? client.PrivateKeyJwt(auth.key)
      : auth.method === "client_secret_basic"
      ? client.ClientSecretBasic(auth.secret)
      : client.ClientSecretPost(auth.secret)
  )
  client.allowInsecureRequests(config)
  config[client.customFetch] = toPort(port)
  return config
}

/** oauth4webapi's per-request options: the test port, plain HTTP. */
const o4wOptions = (port: number) => ({ [oauth.customFetch]: toPort(port), [oauth.allowInsecureRequests]: true })

const o4wIntrospect = (port: number, rs: Fixture, token: string, auth = oauth.ClientSecretBasic(rs.clientSecret)) =>
  refused(async () => {
    const response = await oauth.introspectionRequest(METADATA, { client_id: rs.clientId }, auth, token, o4wOptions(port))
    return oauth.processIntrospectionResponse(METADATA, { client_id: rs.clientId }, response)
  })

/**
 * A token of one service, another service's fixture, and a resource server allowed to introspect
 * the first one's profile. The server's clock is set to the real one: private_key_jwt assertions are
 * signed by it.
 */
const librariesSetup = Effect.gen(function*() {
  yield* TestClock.setTime(Date.now())
  const port = yield* serverPort
  const target = yield* createFixture()
  const elsewhere = yield* createFixture()
  const rs = yield* createFixture()
  yield* allow(rs.servicePath, rs.clientId, [target.profile])
  const token = yield* issueToken(target)
  return { port, target, elsewhere, rs, token }
})

layer(makeTestServer(), { timeout: 60_000 })("standard libraries introspect and revoke unmodified", (it) => {
  it.effect("openid-client: tokenIntrospection with Basic, post and private_key_jwt; tokenRevocation; each refusal", () =>
    Effect.gen(function*() {
      const { port, target, elsewhere, rs, token } = yield* librariesSetup

      const basic = openidConfig(port, rs.clientId, { method: "client_secret_basic", secret: rs.clientSecret })
      const active = yield* Effect.promise(() => client.tokenIntrospection(basic, token))
      expect(active).toMatchObject({ active: true, client_id: target.clientId, token_type: "Bearer", iss: ISSUER })
      const post = openidConfig(port, rs.clientId, { method: "client_secret_post", secret: rs.clientSecret })
      expect((yield* Effect.promise(() => client.tokenIntrospection(post, token))).active).toBe(true)
      const key = yield* Effect.promise(() => clientKey("EC"))
      const keyed = (yield* addKeyCredential(rs, key.publicJwk)).body.client_id as string
      yield* allow(rs.servicePath, keyed, [target.profile])
      const jwt = openidConfig(port, keyed, { method: "private_key_jwt", key: key.privateKey })
      expect((yield* Effect.promise(() => client.tokenIntrospection(jwt, token))).active).toBe(true)

      // Not a token, or another profile's token: inactive, not an error.
      expect(yield* Effect.promise(() => client.tokenIntrospection(basic, "not-a-token"))).toEqual({ active: false })
      const other = yield* issueToken(elsewhere)
      expect(yield* Effect.promise(() => client.tokenIntrospection(basic, other))).toEqual({ active: false })

      const wrong = openidConfig(port, rs.clientId, { method: "client_secret_basic", secret: "wrong" })
      expect(yield* refused(() => client.tokenIntrospection(wrong, token))).toEqual({ status: 401, error: "invalid_client" })
      const unknown = openidConfig(port, "svc_unknown", { method: "client_secret_post", secret: "x" })
      expect(yield* refused(() => client.tokenIntrospection(unknown, token))).toEqual({ status: 401, error: "invalid_client" })
      const notAllowed = openidConfig(port, elsewhere.clientId, { method: "client_secret_basic", secret: elsewhere.clientSecret })
      expect(yield* refused(() => client.tokenIntrospection(notAllowed, token))).toEqual({ status: 403, error: "unauthorized_client" })

      // Revocation with each method, then introspection sees it, on the key credential's own token too.
      const revoker = openidConfig(port, target.clientId, { method: "client_secret_basic", secret: target.clientSecret })
      yield* Effect.promise(() => client.tokenRevocation(revoker, token))
      expect(yield* Effect.promise(() => client.tokenIntrospection(basic, token))).toEqual({ active: false })
      const rsToken = yield* Effect.promise(() =>
        client.clientCredentialsGrant(jwt, { profile: rs.profile, environment: rs.environment, service_uuid: rs.uuid })
      )
      yield* allow(rs.servicePath, rs.clientId, [target.profile, rs.profile])
      expect((yield* Effect.promise(() => client.tokenIntrospection(basic, rsToken.access_token))).active).toBe(true)
      yield* Effect.promise(() => client.tokenRevocation(jwt, rsToken.access_token))
      expect(yield* Effect.promise(() => client.tokenIntrospection(basic, rsToken.access_token))).toEqual({ active: false })
      const wrongRevoker = openidConfig(port, target.clientId, { method: "client_secret_post", secret: "wrong" })
      expect(yield* refused(() => client.tokenRevocation(wrongRevoker, token))).toEqual({ status: 401, error: "invalid_client" })
    }))

  it.effect("oauth4webapi: introspectionRequest + processIntrospectionResponse, revocationRequest; each refusal", () =>
    Effect.gen(function*() {
      const { port, target, elsewhere, rs, token } = yield* librariesSetup

      expect(yield* o4wIntrospect(port, rs, token)).toMatchObject({ resolved: { active: true, client_id: target.clientId } })
      expect(yield* o4wIntrospect(port, rs, token, oauth.ClientSecretPost(rs.clientSecret)))
        .toMatchObject({ resolved: { active: true } })
      const key = yield* Effect.promise(() => clientKey("EC"))
      const keyed = fixtureOf(rs, { client_id: (yield* addKeyCredential(rs, key.publicJwk)).body.client_id, client_secret: "" })
      yield* allow(rs.servicePath, keyed.clientId, [target.profile])
      expect(yield* o4wIntrospect(port, keyed, token, oauth.PrivateKeyJwt(key.privateKey)))
        .toMatchObject({ resolved: { active: true } })
      expect(yield* o4wIntrospect(port, rs, yield* issueToken(elsewhere))).toEqual({ resolved: { active: false } })

      expect(yield* o4wIntrospect(port, rs, token, oauth.ClientSecretBasic("wrong"))).toEqual({ status: 401, error: "invalid_client" })
      expect(yield* o4wIntrospect(port, { ...rs, clientId: "svc_unknown" }, token))
        .toEqual({ status: 401, error: "invalid_client" })
      expect(yield* o4wIntrospect(port, elsewhere, token)).toEqual({ status: 403, error: "unauthorized_client" })
      // An admin Bearer token on top of the client's own authentication (oauth4webapi refuses to send
      // one itself: a proxy in between adds it): two methods.
      const both = yield* refused(async () => {
        const response = await oauth.introspectionRequest(
          METADATA,
          { client_id: rs.clientId },
          oauth.ClientSecretPost(rs.clientSecret),
          token,
          {
            ...o4wOptions(port),
            [oauth.customFetch]: (url: string, options: RequestInit) => {
              const headers = new Headers(options.headers)
              headers.set("authorization", `Bearer ${ADMIN_TOKEN}`)
              return toPort(port)(url, { ...options, headers })
            }
          }
        )
        return oauth.processIntrospectionResponse(METADATA, { client_id: rs.clientId }, response)
      })
      expect(both).toEqual({ status: 400, error: "invalid_request" })

      // An expiring credential, then a deleted one: 401 invalid_client once gone.
      const now = yield* TestClock.currentTimeMillis
      const spare = yield* createFixture()
      const expiring = yield* admin.post(`${spare.servicePath}/credentials`, { expires_at: new Date(now + 60_000).toISOString() })
      expect(expiring.status).toBe(201)
      const expiringRs = fixtureOf(spare, expiring.body)
      yield* allow(spare.servicePath, expiringRs.clientId, [target.profile])
      expect(yield* o4wIntrospect(port, expiringRs, token)).toMatchObject({ resolved: { active: true } })
      yield* TestClock.adjust("61 seconds")
      expect(yield* o4wIntrospect(port, expiringRs, token)).toEqual({ status: 401, error: "invalid_client" })
      yield* TestClock.setTime(Date.now())
      expect((yield* admin.delete(`${rs.servicePath}/credentials/${rs.clientId}`)).status).toBe(204)
      expect(yield* o4wIntrospect(port, rs, token)).toEqual({ status: 401, error: "invalid_client" })

      // Revocation, unmodified, then the key credential sees the token inactive.
      const revoked = yield* refused(async () => {
        const response = await oauth.revocationRequest(
          METADATA,
          { client_id: target.clientId },
          oauth.ClientSecretBasic(target.clientSecret),
          token,
          o4wOptions(port)
        )
        return oauth.processRevocationResponse(response)
      })
      expect(revoked).toEqual({ resolved: undefined })
      expect(yield* o4wIntrospect(port, keyed, token, oauth.PrivateKeyJwt(key.privateKey))).toEqual({ resolved: { active: false } })
    }))
})
