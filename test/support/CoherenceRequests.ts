/**
 * The cache coherence run's requests and expectations: every request to an instance timed and never
 * throwing (no answer within REQUEST_TIMEOUT_MS is status 0), the admin calls that build profiles,
 * services and credentials with a token each, and what a live, a deleted or a cut-off credential
 * gets (docs/contract.md §1, §2). The cluster they run against is test/support/CoherenceCluster.ts.
 */
import { randomBytes } from "node:crypto"
import { performance } from "node:perf_hooks"
import { expect } from "vitest"
import { LEASE_MS } from "../../src/catalogue/CacheLease.js"
import type { ServerProcess } from "./ServerProcess.js"

export const DATABASE_URL = process.env.TEST_DATABASE_URL === "" ? undefined : process.env.TEST_DATABASE_URL
export const ADMIN_TOKEN = randomBytes(24).toString("base64url")

/**
 * The protocol's bound on any acknowledgement: a deletion waits out an unreachable instance's lease
 * (2 s, and 0.1 s of slack) and no longer. The margin is for a busy machine, not for the protocol.
 */
export const ACK_WITHIN_MS = LEASE_MS + 2_500
/** What a deleter logs when it waited out the lease of an instance that did not acknowledge. */
export const WAITED_OUT_A_LEASE = "a change waited out the lease of an instance that did not acknowledge it"
/** How long an instance may take to serve live credentials again after a database outage (polled). */
export const RECOVERY_MS = 15_000
/** How long warming lasts before a freeze or an outage: longer than a lease (see `warmSteadily`). */
const STEADY_MS = 2_500
/** A request not answered within this counts as status 0 (never as an acceptance). */
const REQUEST_TIMEOUT_MS = 5_000

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const freshName = () => `coherence-${randomBytes(6).toString("hex")}`

export interface Instance {
  readonly name: string
  readonly server: ServerProcess
}

export interface Answer {
  readonly label: string
  readonly status: number
  readonly body: any
  readonly text: string
  /** performance.now() when the request was sent and when its answer had been read. */
  readonly start: number
  readonly end: number
}

export const describeAnswer = (answer: Answer) =>
  `${answer.label}: ${answer.status} after ${Math.round(answer.end - answer.start)} ms: ${answer.text.slice(0, 300)}`

export interface Service {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
}

export interface Credential {
  readonly name: string
  readonly service: Service
  readonly client_id: string
  readonly client_secret: string
  /** A token issued when the credential was made: the "old token" a deletion must kill. */
  readonly token: string
}

export const adminPath = (service: Service) =>
  `/admin/profiles/${service.profile}/environments/${service.environment}/services/${service.uuid}`
const callPath = (service: Service) => `/service/${service.profile}/${service.environment}/json/${service.uuid}`

/** Any request, timed; never throws (no answer within REQUEST_TIMEOUT_MS is status 0). */
const send = async (
  instance: Instance,
  label: string,
  method: string,
  path: string,
  init: { readonly headers?: Record<string, string>; readonly body?: string } = {}
): Promise<Answer> => {
  const start = performance.now()
  const fullLabel = `${instance.name}: ${label}`
  try {
    const response = await fetch(`${instance.server.base}${path}`, {
      method,
      headers: init.headers ?? {},
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    })
    const text = await response.text()
    let body: unknown = undefined
    try {
      body = text === "" ? undefined : JSON.parse(text)
    } catch {
      body = undefined
    }
    return { label: fullLabel, status: response.status, body, text, start, end: performance.now() }
  } catch (error) {
    return { label: fullLabel, status: 0, body: undefined, text: String(error), start, end: performance.now() }
  }
}

export const admin = (instance: Instance, method: string, path: string, body?: unknown) =>
  send(instance, `${method} ${path}`, method, path, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

/** An admin request that must answer `status`; its body. */
const adminOk = async (instance: Instance, method: string, path: string, body: unknown, status: number) => {
  const answer = await admin(instance, method, path, body)
  expect(answer.status, describeAnswer(answer)).toBe(status)
  return answer.body
}

export const requestToken = (instance: Instance, credential: Credential) =>
  send(instance, `token for ${credential.name}`, "POST", "/oauth/token", {
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: credential.client_id,
      client_secret: credential.client_secret,
      profile: credential.service.profile,
      environment: credential.service.environment,
      service_uuid: credential.service.uuid
    }).toString()
  })

export const callService = (instance: Instance, credential: Credential, token = credential.token) =>
  send(instance, `call with ${credential.name}'s token`, "POST", callPath(credential.service), {
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ probe: credential.name })
  })

/** A fresh profile with these environments, through `via`. */
export const createProfile = async (via: Instance, environments: ReadonlyArray<string>) => {
  const profile = freshName()
  await adminOk(via, "PUT", `/admin/profiles/${profile}`, {}, 201)
  for (const environment of environments) {
    await adminOk(via, "PUT", `/admin/profiles/${profile}/environments/${environment}`, {}, 201)
  }
  return profile
}

export const createService = async (via: Instance, profile: string, environment: string): Promise<Service> => {
  const document = await adminOk(via, "POST", `/admin/profiles/${profile}/environments/${environment}/services`, {
    name: "billing",
    auth_type: "oauth"
  }, 201)
  return { profile, environment, uuid: document.uuid }
}

/** A new credential through `via`, with a token issued by `via`. */
export const addCredential = async (via: Instance, service: Service, name: string): Promise<Credential> => {
  const created = await adminOk(via, "POST", `${adminPath(service)}/credentials`, {}, 201)
  const credential = { name, service, client_id: created.client_id, client_secret: created.client_secret, token: "" }
  const issued = await requestToken(via, credential)
  expect(issued.status, describeAnswer(issued)).toBe(200)
  return { ...credential, token: issued.body.access_token }
}

/** What is wrong with `credential` on `instance`, or undefined when its old token is accepted and a token is issued. */
export const liveProblem = async (instance: Instance, credential: Credential): Promise<string | undefined> => {
  const called = await callService(instance, credential)
  if (called.status !== 200 || called.body?.client_id !== credential.client_id) return describeAnswer(called)
  const issued = await requestToken(instance, credential)
  if (issued.status !== 200) return describeAnswer(issued)
  return undefined
}

/** The credential works on the instance: its old token is accepted as the caller, and a token is issued. */
export const expectLive = async (instance: Instance, credential: Credential) => {
  const called = await callService(instance, credential)
  expect({ status: called.status, client_id: called.body?.client_id }, describeAnswer(called)).toEqual({
    status: 200,
    client_id: credential.client_id
  })
  const issued = await requestToken(instance, credential)
  expect(issued.status, describeAnswer(issued)).toBe(200)
}

/** Several successful token requests and service calls per credential, so a cache would hold every entry. */
export const warm = async (instance: Instance, credentials: ReadonlyArray<Credential>, rounds = 3) => {
  for (let round = 0; round < rounds; round++) {
    for (const credential of credentials) await expectLive(instance, credential)
  }
}
export const warmAll = (instances: ReadonlyArray<Instance>, credentials: ReadonlyArray<Credential>) =>
  Promise.all(instances.map((instance) => warm(instance, credentials)))

/**
 * Warming that lasts at least STEADY_MS (longer than a lease): an instance that has just come back
 * from an earlier outage may still be reading the database on every request; after this it is back
 * to its steady state, the one where stale entries could be served.
 */
export const warmSteadily = async (instances: ReadonlyArray<Instance>, credentials: ReadonlyArray<Credential>) => {
  const start = performance.now()
  do {
    await warmAll(instances, credentials)
  } while (performance.now() - start < STEADY_MS)
}

/**
 * What a deletion leaves of a credential (docs/contract.md §1, §2):
 * - "revoked": the credential is gone, its service stays: token 401 invalid_client, call 401 invalid_token;
 * - "service gone": token 400 invalid_request (never 404), call 404 not_found;
 * - "service open": the service is no longer `oauth`: token 400 invalid_request; a call is served
 *   anonymously (`client_id: null`), never as the credential.
 */
export type Fate = "revoked" | "service gone" | "service open"

export const REFUSED: Record<Fate, { readonly call: Record<string, unknown>; readonly token: Record<string, unknown> }> = {
  revoked: { call: { status: 401, error: "invalid_token" }, token: { status: 401, error: "invalid_client" } },
  "service gone": { call: { status: 404, error: "not_found" }, token: { status: 400, error: "invalid_request" } },
  "service open": { call: { status: 200, client_id: null }, token: { status: 400, error: "invalid_request" } }
}

export const callOutcome = (answer: Answer) =>
  answer.status === 200
    ? { status: 200, client_id: answer.body?.client_id }
    : { status: answer.status, error: answer.body?.error }

/** The instance's next request (a call with the old token) is refused, and so is a token request. */
export const expectRefused = async (instance: Instance, credential: Credential, fate: Fate) => {
  const called = await callService(instance, credential)
  expect(callOutcome(called), describeAnswer(called)).toEqual(REFUSED[fate].call)
  const issued = await requestToken(instance, credential)
  expect({ status: issued.status, error: issued.body?.error }, describeAnswer(issued)).toEqual(REFUSED[fate].token)
}

/** The deleted credential's token during an outage: anything but an acceptance (401, 503, or no answer). */
export const expectNotAcceptedDuringOutage = (answer: Answer) => {
  expect(answer.status, `${describeAnswer(answer)}: the deleted credential was accepted`).not.toBe(200)
  expect([0, 401, 503], describeAnswer(answer)).toContain(answer.status)
}

/** Polls `attempt` (undefined: done) for up to `withinMs`; how long it took, or fails with the last problem. */
export const pollUntil = async (label: string, withinMs: number, attempt: () => Promise<string | undefined>) => {
  const start = performance.now()
  let last = "never tried"
  while (performance.now() - start < withinMs) {
    const problem = await attempt()
    if (problem === undefined) return performance.now() - start
    last = problem
    await sleep(100)
  }
  throw new Error(`${label}: not within ${withinMs} ms; last: ${last}`)
}
