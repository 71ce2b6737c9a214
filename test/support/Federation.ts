/**
 * Federated clients for the tests: a service, a trusted issuer registered for its profile (plain
 * HTTP on loopback, allowed), a federated credential on the service, and token requests that send
 * the workload's token as the client assertion.
 */
import { Clock, Effect } from "effect"
import { expect } from "@effect/vitest"
import { admin, tokenRequest, uniqueName } from "../../src/testing.js"
import { createService, JWT_BEARER, type ServiceFixture, targetOf } from "./ClientKeys.js"
import type { WorkloadIssuer } from "./WorkloadIssuer.js"

export const ISSUER = "http://issuer.test"

export interface FederatedClient {
  readonly service: ServiceFixture
  readonly issuerName: string
  readonly clientId: string
}

/** Registers `issuer` under a new name for `profiles`, with `settings` over the defaults. */
export const registerIssuer = (issuer: WorkloadIssuer, profiles: ReadonlyArray<string>, settings: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const name = uniqueName("issuer")
    const registered = yield* admin.put(`/admin/trusted-issuers/${name}`, {
      issuer: issuer.url,
      profiles,
      allow_insecure_loopback: true,
      ...settings
    })
    expect(registered.status).toBe(201)
    return name
  })

/** A service whose one credential is federated: `subject` and `claims` of `issuer`'s tokens. */
export const federatedClient = (
  issuer: WorkloadIssuer,
  identity: { readonly subject: string; readonly claims?: Record<string, string> },
  settings: Record<string, unknown> = {},
  serviceBody: Record<string, unknown> = {}
) =>
  Effect.gen(function*() {
    const service = yield* createService(serviceBody)
    const issuerName = yield* registerIssuer(issuer, [service.profile], settings)
    const created = yield* admin.post(`${service.servicePath}/federated-credentials`, { issuer: issuerName, ...identity })
    expect(created.status).toBe(201)
    return { service, issuerName, clientId: created.body.client_id as string } satisfies FederatedClient
  })

/** The token request of a federated client: its workload's token as `client_assertion`, with `client_id`. */
export const federatedTokenRequest = (
  client: FederatedClient,
  workloadToken: string,
  extra: Record<string, string> = {},
  headers: Record<string, string> = {}
) =>
  tokenRequest({
    ...targetOf(client.service),
    client_id: client.clientId,
    client_assertion_type: JWT_BEARER,
    client_assertion: workloadToken,
    ...extra
  }, headers)

/** The server's clock (the TestClock, set to the real time by each case) in seconds. */
export const nowSeconds = Effect.map(Clock.currentTimeMillis, (millis) => Math.floor(millis / 1000))
