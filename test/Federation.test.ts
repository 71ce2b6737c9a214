/**
 * Workload identity federation end to end, through the real HttpApi on every storage: trusted
 * issuers on loopback that sign like a Kubernetes cluster, GitHub Actions and a SPIFFE trust domain
 * (discovery, JWKS), a federated credential per service, and tokens for their workloads' tokens;
 * key rotation at the issuer and an issuer outage; DPoP, require_dpop, last use, expiry, deletion.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { admin, makeTestServer, send } from "../src/testing.js"
import { HttpClientRequest } from "@effect/platform"
import { clientKey, dpopProof } from "./support/ClientKeys.js"
import { describeWithPostgres, embeddedStorage, postgresStorage } from "./support/Databases.js"
import { federatedClient, federatedTokenRequest, ISSUER, nowSeconds } from "./support/Federation.js"
import { githubClaims, kubernetesClaims, spiffeClaims, workloadIssuer } from "./support/WorkloadIssuer.js"

const KUBERNETES_SUB = "system:serviceaccount:payments:billing"

const expectRefused = (response: { status: number; body: any; headers: Record<string, string> }) => {
  expect(response.status).toBe(401)
  expect(response.body.error).toBe("invalid_client")
  expect(response.headers["cache-control"]).toBe("no-store")
}

const serviceCall = (service: { profile: string; environment: string; uuid: string }, accessToken: string) =>
  send(
    HttpClientRequest.post(`/service/${service.profile}/${service.environment}/json/${service.uuid}`).pipe(
      HttpClientRequest.bearerToken(accessToken),
      HttpClientRequest.bodyUnsafeJson({})
    )
  )

const suite = (storage?: Parameters<typeof makeTestServer>[0]) =>
  layer(makeTestServer(storage), { timeout: 120_000 })((it) => {
    it.scoped("a Kubernetes-like workload gets a token with its projected token; the credential is listed and used", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ alg: "RS256", path: "cluster" })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB })
        // Signed on the server's clock.
        const now = yield* nowSeconds
        const workload = yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER)))
        const issued = yield* federatedTokenRequest(client, workload)
        expect(issued.status).toBe(200)
        expect(issued.body.token_type).toBe("Bearer")
        expect(issued.headers["cache-control"]).toBe("no-store")
        // The same workload token again: reused by design until it expires.
        expect((yield* federatedTokenRequest(client, workload)).status).toBe(200)
        expect((yield* serviceCall(client.service, issued.body.access_token)).status).toBe(200)
        const listed = yield* admin.get(`${client.service.servicePath}/credentials`)
        expect(listed.body.credentials).toEqual([{
          client_id: client.clientId,
          created_at: expect.any(String),
          expires_at: null,
          last_used_at: expect.any(String),
          federated: { issuer: client.issuerName, subject: KUBERNETES_SUB }
        }])
      }))

    it.scoped("a GitHub-Actions-like job needs its repository and environment claims exactly", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const actions = yield* workloadIssuer({ alg: "RS256", path: "actions" })
        const client = yield* federatedClient(actions, {
          subject: "repo:acme/billing:environment:production",
          claims: { repository: "acme/billing", environment: "production" }
        }, { audience: "https://github.com/acme" })
        const now = yield* nowSeconds
        const job = yield* Effect.promise(() => actions.sign(githubClaims(now, "https://github.com/acme")))
        expect((yield* federatedTokenRequest(client, job)).status).toBe(200)
        const staging = yield* Effect.promise(() =>
          actions.sign({ ...githubClaims(now, "https://github.com/acme"), environment: "staging" })
        )
        const refused = yield* federatedTokenRequest(client, staging)
        expectRefused(refused)
        expect(refused.body.error_description).toBe(
          "Invalid client credentials: the token's environment claim is not the credential's value"
        )
      }))

    it.scoped("a SPIFFE workload's ES256 JWT-SVID gets a token", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const spire = yield* workloadIssuer({ alg: "ES256", path: "spire" })
        const client = yield* federatedClient(spire, { subject: "spiffe://example.org/ns/payments/sa/billing" })
        const svid = yield* Effect.promise(() => spire.sign(spiffeClaims(Math.floor(Date.now() / 1000), ISSUER)))
        expect((yield* federatedTokenRequest(client, svid)).status).toBe(200)
      }))

    it.scoped("keys rotated at the issuer are found with one refetch; a token of a dropped key is refused", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "rotating" })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB })
        const now = yield* nowSeconds
        const oldKid = cluster.currentKid()
        const before = yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER)))
        expect((yield* federatedTokenRequest(client, before)).status).toBe(200)
        const fetches = cluster.jwksFetches()
        yield* Effect.promise(() => cluster.rotate())
        const after = yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER)))
        expect((yield* federatedTokenRequest(client, after)).status).toBe(200)
        expect(cluster.jwksFetches()).toBe(fetches + 1)
        // The keys held now are the rotated ones only: the old key's token no longer verifies.
        expectRefused(
          yield* federatedTokenRequest(client, yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER), { kid: oldKid })))
        )
      }))

    it.scoped("through an issuer outage the last good keys still verify; an unknown key then fails", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "outage", maxAgeSeconds: 60 })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB })
        const now = yield* nowSeconds
        expect((yield* federatedTokenRequest(client, yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER))))).status)
          .toBe(200)
        cluster.setDown(true)
        // Past the keys' max-age: the refetch fails, the last good keys are kept.
        yield* TestClock.adjust("5 minutes")
        const later = yield* nowSeconds
        const token = yield* Effect.promise(() => cluster.sign(kubernetesClaims(later, ISSUER)))
        expect((yield* federatedTokenRequest(client, token)).status).toBe(200)
        const stranger = yield* Effect.promise(() => cluster.sign(kubernetesClaims(later, ISSUER), { kid: "unknown" }))
        expectRefused(yield* federatedTokenRequest(client, stranger))
        cluster.setDown(false)
      }))

    it.scoped("an issuer with inline keys (unreachable, e.g. a private cluster) needs no discovery", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "private" })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB }, { jwks: cluster.jwks() })
        cluster.setDown(true)
        const now = yield* nowSeconds
        expect((yield* federatedTokenRequest(client, yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER))))).status)
          .toBe(200)
        expect(cluster.jwksFetches()).toBe(0)
      }))

    it.scoped("with a DPoP proof the token is bound; require_dpop is honoured; expiry and deletion end it", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "dpop" })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB }, {}, { require_dpop: true })
        const now = yield* nowSeconds
        const workload = yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER)))
        const bearer = yield* federatedTokenRequest(client, workload)
        expect(bearer.status).toBe(400)
        expect(bearer.body.error).toBe("invalid_request")
        const key = yield* Effect.promise(() => clientKey("EC"))
        const proof = yield* Effect.promise(() => dpopProof(key, `${ISSUER}/oauth/token`, now * 1000))
        const bound = yield* federatedTokenRequest(client, workload, {}, { dpop: proof })
        expect(bound.status).toBe(200)
        expect(bound.body.token_type).toBe("DPoP")
        // Deleted: refused from now on.
        expect((yield* admin.delete(`${client.service.servicePath}/credentials/${client.clientId}`)).status).toBe(204)
        const proof2 = yield* Effect.promise(() => dpopProof(key, `${ISSUER}/oauth/token`, now * 1000))
        expectRefused(yield* federatedTokenRequest(client, workload, {}, { dpop: proof2 }))
      }))

    it.scoped("an expired federated credential is refused; its service call with an earlier token too", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const cluster = yield* workloadIssuer({ path: "expiring" })
        const client = yield* federatedClient(cluster, { subject: KUBERNETES_SUB })
        const path = `${client.service.servicePath}/federated-credentials`
        const expiresAt = new Date(Date.now() + 60_000).toISOString()
        const second = yield* admin.post(path, { issuer: client.issuerName, subject: KUBERNETES_SUB, expires_at: expiresAt })
        expect(second.status).toBe(201)
        expect(second.body.expires_at).toBe(expiresAt)
        const now = yield* nowSeconds
        const workload = yield* Effect.promise(() => cluster.sign(kubernetesClaims(now, ISSUER)))
        const issued = yield* federatedTokenRequest({ ...client, clientId: second.body.client_id }, workload)
        expect(issued.status).toBe(200)
        yield* TestClock.adjust("2 minutes")
        expectRefused(yield* federatedTokenRequest({ ...client, clientId: second.body.client_id }, workload))
        expect((yield* serviceCall(client.service, issued.body.access_token)).status).toBe(401)
        // Two live credentials (one expired still counts until deleted): a third is refused.
        const third = yield* admin.post(path, { issuer: client.issuerName, subject: KUBERNETES_SUB })
        expect(third.status).toBe(409)
      }))
  })

describe("workload identity federation (memory)", () => suite())
describe("workload identity federation (embedded)", () => suite({ storage: embeddedStorage() }))
describeWithPostgres("workload identity federation (PostgreSQL)", () => suite({ storage: postgresStorage() }))
