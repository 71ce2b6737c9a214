/**
 * What the hostile input tests share: a server that does not lock clients out, its fixture, raw
 * requests, property settings, and the check that the server still answers normally.
 */
import { expect } from "@effect/vitest"
import { SERVICE_VERSION } from "../../src/config/Version.js"
import { Effect } from "effect"
import { formEncode, type RawRequest, rawRequest, type RawResponse } from "./Http.js"
import {
  ADMIN_TOKEN,
  createFixture,
  type Fixture,
  issueToken,
  makeTestServer,
  serverPort,
  sharedFixture,
  tokenRequest
} from "../../src/testing.js"

export const ADMIN = `Bearer ${ADMIN_TOKEN}`

/** The server under test: failures of client authentication never lock the fixture out here. */
export const testServer = () => makeTestServer({ config: { authFailureLimit: 1_000_000 } })

export interface Ready extends Fixture {
  readonly port: number
  readonly token: string
}

/** A fixture (profile, environment, oauth service, credential, token) created once per server. */
export const fixtureOnce = () =>
  sharedFixture(Effect.gen(function*() {
    const fixture = yield* createFixture()
    const token = yield* issueToken(fixture)
    return { ...fixture, token, port: yield* serverPort } satisfies Ready
  }))

export const send = (port: number, request: RawRequest): Promise<RawResponse> => rawRequest(port, request)

export const parse = (text: string): any => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export const form = (fields: ReadonlyArray<readonly [string, string]>) =>
  fields.map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")

export const servicePath = (f: Pick<Fixture, "profile" | "environment" | "uuid">) => `/service/${f.profile}/${f.environment}/json/${f.uuid}`

export const adminPaths = (f: Pick<Fixture, "profile" | "environment" | "uuid">) => {
  const service = `/admin/profiles/${f.profile}/environments/${f.environment}/services/${f.uuid}`
  return {
    profile: `/admin/profiles/${f.profile}`,
    save: `/admin/profiles/${f.profile}/save`,
    environment: `/admin/profiles/${f.profile}/environments/${f.environment}`,
    services: `/admin/profiles/${f.profile}/environments/${f.environment}/services`,
    service,
    credentials: `${service}/credentials`
  }
}

/** The server still answers normally: liveness and a real token request. */
export const expectHealthy = (ready: Ready) =>
  Effect.gen(function*() {
    const health = yield* Effect.promise(() => send(ready.port, { method: "GET", path: "/healthz" }))
    expect(health.status).toBe(200)
    expect(parse(health.text)).toEqual({ status: "ok", version: SERVICE_VERSION })
    const token = yield* tokenRequest(ready.tokenFields)
    expect(token.status).toBe(200)
    expect(token.body.token_type).toBe("Bearer")
  })
