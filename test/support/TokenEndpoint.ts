/** What the token endpoint tests share: the expected errors, the checks of an answer, the form fields. */
import { expect } from "@effect/vitest"
import { expectErrorBody, oauthError } from "./Http.js"
import { type Fixture, type JsonResponse } from "../../src/testing.js"

export const MISSING = oauthError("invalid_request", "Missing required parameters")

export const INVALID_CLIENT = oauthError("invalid_client", "Invalid client credentials")

export const REQUIRED_FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const

export type Field = typeof REQUIRED_FIELDS[number]

/** Every answer of the token endpoint: no caching (RFC 6749 §5.1), a JSON body. */
export const expectNoStore = (response: JsonResponse) => {
  expect(response.headers["cache-control"]).toBe("no-store")
  expect(response.headers["pragma"]).toBe("no-cache")
  expect(response.headers["content-type"]).toMatch(/^application\/json\b/)
}

export const expectError = (response: JsonResponse, status: number, body: ReturnType<typeof oauthError>) => {
  expectErrorBody(response, status, body)
  expectNoStore(response)
}

export const expectToken = (response: JsonResponse) => {
  expect({ status: response.status, body: response.body }).toEqual({
    status: 200,
    body: { access_token: expect.any(String), token_type: "Bearer", expires_in: 3600, scope: "service:call" }
  })
  expectNoStore(response)
  return response.body.access_token as string
}

export const without = (fields: Record<string, string>, ...names: ReadonlyArray<Field>) =>
  Object.fromEntries(Object.entries(fields).filter(([name]) => !names.includes(name as Field)))

/** The fixture's form without its client credentials, for client_secret_basic. */
export const targetFields = (fixture: Fixture) => without(fixture.tokenFields, "client_id", "client_secret")

export const wrongSecret = "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZy1zZWNyZXQ"
