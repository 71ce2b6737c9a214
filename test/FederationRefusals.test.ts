/**
 * Every refusal of a federated client at the token endpoint: 401 `invalid_client`, `no-store`,
 * worded as a key credential's refusals are (a reason only once the token's signature verified, or
 * for a refused algorithm), on memory storage (the checks are storage's only through the issuer's
 * lookup, which `Federation.test.ts` runs on every storage).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { admin, makeTestServer, tokenRequest } from "../src/testing.js"
import { JWT_BEARER, targetOf } from "./support/ClientKeys.js"
import { federatedClient, federatedTokenRequest, ISSUER, nowSeconds } from "./support/Federation.js"
import { kubernetesClaims, workloadIssuer } from "./support/WorkloadIssuer.js"
import { hmacWith, unsigned } from "./support/Tokens.js"

const SUB = "system:serviceaccount:payments:billing"
const FIXED = "Invalid client credentials"

const expectRefused = (response: { status: number; body: any; headers: Record<string, string> }, description = FIXED) => {
  expect(response.status).toBe(401)
  expect(response.body).toEqual({ error: "invalid_client", error_description: description })
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["www-authenticate"]).toBeUndefined()
}

const told = (reason: string) => `${FIXED}: ${reason}`

describe("federated client refusals", () => {
  layer(makeTestServer(), { timeout: 120_000 })((it) => {
    const setUp = (settings: Record<string, unknown> = {}, claims?: Record<string, string>) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "refusals" })
        const client = yield* federatedClient(cluster, { subject: SUB, ...(claims === undefined ? {} : { claims }) }, settings)
        const now = yield* nowSeconds
        const sign = (overrides: Record<string, unknown> = {}, options: { kid?: string; alg?: string } = {}) =>
          Effect.promise(() => cluster.sign({ ...kubernetesClaims(now, ISSUER), ...overrides }, options))
        return { cluster, client, now, sign }
      })

    it.scoped("an untrusted issuer: a token of another issuer", () =>
      Effect.gen(function*() {
        const { client, now } = yield* setUp()
        const other = yield* workloadIssuer({ path: "other" })
        expectRefused(yield* federatedTokenRequest(client, yield* Effect.promise(() => other.sign(kubernetesClaims(now, ISSUER)))))
      }))

    it.scoped("an issuer not allowed for the profile (changed after the credential was made)", () =>
      Effect.gen(function*() {
        const { client, cluster, sign } = yield* setUp()
        const token = yield* sign()
        expect((yield* federatedTokenRequest(client, token)).status).toBe(200)
        const replaced = yield* admin.put(`/admin/trusted-issuers/${client.issuerName}`, {
          issuer: cluster.url,
          profiles: ["some-other-profile"],
          allow_insecure_loopback: true
        })
        expect(replaced.status).toBe(200)
        expectRefused(
          yield* federatedTokenRequest(client, token),
          told(`the trusted issuer ${client.issuerName} is not allowed for profile ${client.service.profile}`)
        )
      }))

    it.scoped("a wrong sub, a wrong claim", () =>
      Effect.gen(function*() {
        const { client, sign } = yield* setUp({}, { "kubernetes.io/namespace": "payments" })
        expectRefused(
          yield* federatedTokenRequest(
            client,
            yield* sign({ "kubernetes.io/namespace": "payments", sub: "system:serviceaccount:payments:other" })
          ),
          told("the token's sub is not the credential's subject")
        )
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign({ "kubernetes.io/namespace": "billing" })),
          told("the token's kubernetes.io/namespace claim is not the credential's value")
        )
        expect((yield* federatedTokenRequest(client, yield* sign({ "kubernetes.io/namespace": "payments" }))).status).toBe(200)
      }))

    it.scoped("a wrong audience", () =>
      Effect.gen(function*() {
        const { client, sign } = yield* setUp()
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign({ aud: ["https://kubernetes.default.svc"] })),
          told(`the token's aud must include "${ISSUER}"`)
        )
      }))

    it.scoped("an expired token, a token not valid yet, a lifetime above the issuer's limit", () =>
      Effect.gen(function*() {
        const { client, now, sign } = yield* setUp({ max_token_lifetime_seconds: 600 })
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign({ iat: now - 400, nbf: now - 400, exp: now - 1 })),
          told("the token has expired (exp is past)")
        )
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign({ iat: now + 60, nbf: now + 60, exp: now + 300 })),
          told("the token is not valid yet (its iat is more than 10 seconds ahead)")
        )
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign({ iat: now, exp: now + 3600 })),
          told("the token's lifetime is above the trusted issuer's limit of 600 seconds")
        )
        expect((yield* federatedTokenRequest(client, yield* sign({ iat: now, exp: now + 600 }))).status).toBe(200)
      }))

    it.scoped("an unknown key, after one refetch (and no more than one per interval)", () =>
      Effect.gen(function*() {
        const { client, cluster, sign } = yield* setUp()
        expect((yield* federatedTokenRequest(client, yield* sign())).status).toBe(200)
        const fetches = cluster.jwksFetches()
        expectRefused(yield* federatedTokenRequest(client, yield* sign({}, { kid: "unknown" })))
        expect(cluster.jwksFetches()).toBe(fetches + 1)
        expectRefused(yield* federatedTokenRequest(client, yield* sign({}, { kid: "unknown" })))
        expect(cluster.jwksFetches()).toBe(fetches + 1)
      }))

    it.scoped("a refused algorithm: one the issuer does not accept, none, HMAC", () =>
      Effect.gen(function*() {
        const { client, cluster, now, sign } = yield* setUp({ algorithms: ["ES256"] })
        expectRefused(
          yield* federatedTokenRequest(client, yield* sign()),
          told(`the token's alg "RS256" is not accepted for this trusted issuer (ES256)`)
        )
        const claims = { iss: cluster.url, ...kubernetesClaims(now, ISSUER) }
        expectRefused(
          yield* federatedTokenRequest(client, unsigned({ alg: "none", typ: "JWT" }, claims)),
          told(`the token's alg "none" is not accepted for this trusted issuer (ES256)`)
        )
        expectRefused(
          yield* federatedTokenRequest(client, hmacWith("HS256", "secret", { alg: "HS256", kid: cluster.currentKid() }, claims)),
          told(`the token's alg "HS256" is not accepted for this trusted issuer (ES256)`)
        )
      }))

    it.scoped("a tampered token: its payload changed after signing, or not a JWT", () =>
      Effect.gen(function*() {
        const { client, sign } = yield* setUp()
        const [header, , signature] = (yield* sign()).split(".")
        const forged = Buffer.from(JSON.stringify({ sub: SUB, aud: [ISSUER], exp: 4102444800 })).toString("base64url")
        expectRefused(yield* federatedTokenRequest(client, `${header}.${forged}.${signature}`))
        expectRefused(yield* federatedTokenRequest(client, "not-a-jwt"))
      }))

    it.scoped("a client secret for a federated credential; a workload token without client_id", () =>
      Effect.gen(function*() {
        const { client, sign } = yield* setUp()
        expectRefused(
          yield* tokenRequest({ ...targetOf(client.service), client_id: client.clientId, client_secret: "a".repeat(43) })
        )
        // Without client_id the assertion's iss (the issuer's URL) would name the client: none is.
        expectRefused(
          yield* tokenRequest({ ...targetOf(client.service), client_assertion_type: JWT_BEARER, client_assertion: yield* sign() })
        )
      }))
  })
})
