/** What the admin API tests share: the shapes of ids, secrets and timestamps, the paths, and the calls. */
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { expectErrorBody, oauthError } from "./Http.js"
import { admin, type JsonResponse, tokenRequest, uniqueName } from "../../src/testing.js"

export const CLIENT_ID = /^svc_[0-9a-f]{32}$/

export const CLIENT_SECRET = /^[A-Za-z0-9_-]{43,}$/

export const TIMESTAMP = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/)

export const expectStatus = (response: JsonResponse, status: number) =>
  expect({ status: response.status, text: response.text }).toEqual({ status, text: expect.any(String) })

export const expectError = (response: JsonResponse, status: number, error: string) => expectErrorBody(response, status, oauthError(error))

export const expectNoContent = (response: JsonResponse) => {
  expect({ status: response.status, text: response.text }).toEqual({ status: 204, text: "" })
}

export const paths = {
  profile: (profile: string) => `/admin/profiles/${profile}`,
  environment: (profile: string, environment: string) => `/admin/profiles/${profile}/environments/${environment}`,
  services: (profile: string, environment: string) => `/admin/profiles/${profile}/environments/${environment}/services`,
  service: (profile: string, environment: string, uuid: string) =>
    `/admin/profiles/${profile}/environments/${environment}/services/${uuid}`,
  save: (profile: string) => `/admin/profiles/${profile}/save`
}

/** A fresh profile with one environment, "production". */
export const createEnvironment = Effect.gen(function*() {
  const profile = uniqueName("profile")
  const environment = "production"
  expectStatus(yield* admin.put(paths.profile(profile)), 201)
  expectStatus(yield* admin.put(paths.environment(profile, environment)), 201)
  return { profile, environment }
})

/** A fresh oauth service without credentials. */
export const createService = (body: Record<string, unknown> = { name: "billing", auth_type: "oauth" }) =>
  Effect.gen(function*() {
    const { profile, environment } = yield* createEnvironment
    const response = yield* admin.post(paths.services(profile, environment), body)
    expectStatus(response, 201)
    const uuid: string = response.body.uuid
    return { profile, environment, uuid, path: paths.service(profile, environment, uuid) }
  })

export const listCredentials = (servicePath: string) =>
  Effect.map(admin.get(`${servicePath}/credentials`), (response) => {
    expectStatus(response, 200)
    return response.body.credentials as ReadonlyArray<{ client_id: string; created_at: string; last_used_at: string | null }>
  })

export const clientIds = (servicePath: string) =>
  Effect.map(listCredentials(servicePath), (credentials) => credentials.map((c) => c.client_id).sort())

export const addCredential = (servicePath: string) =>
  Effect.map(admin.post(`${servicePath}/credentials`), (response) => {
    expectStatus(response, 201)
    return { clientId: response.body.client_id as string, clientSecret: response.body.client_secret as string }
  })

export const tokenFieldsFor = (
  service: { profile: string; environment: string; uuid: string },
  credential: { clientId: string; clientSecret: string }
) => ({
  grant_type: "client_credentials",
  client_id: credential.clientId,
  client_secret: credential.clientSecret,
  profile: service.profile,
  environment: service.environment,
  service_uuid: service.uuid
})

export const expectTokenStatus = (fields: Record<string, string>, status: number, error?: string) =>
  Effect.map(tokenRequest(fields), (response) => {
    expect(response.status).toBe(status)
    if (error !== undefined) expect(response.body).toEqual(oauthError(error))
  })

export const findService = (document: any, environment: string, uuid: string) =>
  (document.environments as Array<any>).find((e) => e.name === environment)?.services.find((s: any) => s.uuid === uuid)
