/**
 * openid-client (v6), as an integrator would use it with a key credential: private_key_jwt client
 * authentication (RFC 7523) with a DPoP-bound token (RFC 9449), then the service called with that
 * token and a fresh proof, then revoked with `tokenRevocation`, through the real HttpApi. Requests go to the test port; the URLs the
 * client signs (`aud`, `htu`) are under ISSUER, as they are in production.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { exportJWK, generateKeyPair } from "jose"
import * as client from "openid-client"
import { decodeJwt } from "./support/Http.js"
import { makeTestServer, serverPort } from "../src/testing.js"
import { addKeyCredential, createService } from "./support/ClientKeys.js"

const ISSUER = "http://issuer.test"

layer(makeTestServer(), { timeout: 120_000 })("openid-client", (it) => {
  it.effect("private_key_jwt and DPoP: a bound token, accepted at the gateway with a proof, refused as Bearer", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const service = yield* createService({ require_dpop: true })
      const credentialKeys = yield* Effect.promise(() => generateKeyPair("ES256", { extractable: true }))
      const added = yield* addKeyCredential(service, yield* Effect.promise(() => exportJWK(credentialKeys.publicKey)))
      expect(added.status).toBe(201)
      const port = yield* serverPort

      const config = new client.Configuration(
        { issuer: ISSUER, token_endpoint: `${ISSUER}/oauth/token` },
        added.body.client_id,
        { token_endpoint_auth_method: "private_key_jwt" },
        client.PrivateKeyJwt(credentialKeys.privateKey)
      )
      client.allowInsecureRequests(config)
      config[client.customFetch] = (url, options) => fetch(url.replace(ISSUER, `http://127.0.0.1:${port}`), options as RequestInit)
      const DPoP = client.getDPoPHandle(config, yield* Effect.promise(() => client.randomDPoPKeyPair("ES256")))

      const tokens = yield* Effect.promise(() =>
        client.clientCredentialsGrant(config, { profile: service.profile, environment: service.environment, service_uuid: service.uuid }, {
          DPoP
        })
      )
      expect(tokens.token_type).toBe("dpop")
      expect(decodeJwt(tokens.access_token).payload).toMatchObject({ client_id: added.body.client_id, cnf: { jkt: expect.any(String) } })

      const url = new URL(`${ISSUER}/service/${service.profile}/${service.environment}/json/${service.uuid}`)
      const call = (options?: client.DPoPOptions) =>
        Effect.promise(async () => {
          // openid-client throws on an answer with a challenge; the answer is on the error.
          const response = await client.fetchProtectedResource(
            config,
            tokens.access_token,
            url,
            "POST",
            JSON.stringify({ hello: "world" }),
            new Headers({ "content-type": "application/json" }),
            options
          ).catch((error: { readonly response?: Response }) => {
            if (error.response === undefined) throw error
            return error.response
          })
          return { status: response.status, challenge: response.headers.get("www-authenticate") }
        })
      expect((yield* call({ DPoP })).status).toBe(200)
      // The same token as Bearer: refused, with the DPoP challenge of a require_dpop service.
      const asBearer = yield* call()
      expect(asBearer.status).toBe(401)
      expect(asBearer.challenge).toBe(`DPoP realm="service", error="invalid_token", algs="RS256 PS256 ES256 EdDSA"`)

      // Revocation, unmodified (RFC 7009), with the same client authentication as the token endpoint.
      const revoking = new client.Configuration(
        { issuer: ISSUER, token_endpoint: `${ISSUER}/oauth/token`, revocation_endpoint: `${ISSUER}/oauth/revoke` },
        added.body.client_id,
        { token_endpoint_auth_method: "private_key_jwt" },
        client.PrivateKeyJwt(credentialKeys.privateKey)
      )
      client.allowInsecureRequests(revoking)
      revoking[client.customFetch] = config[client.customFetch]
      yield* Effect.promise(() => client.tokenRevocation(revoking, tokens.access_token))
      expect((yield* call({ DPoP })).status).toBe(401)
    }))
})
