/**
 * Hostile input never breaks the server: property-based tests throw arbitrary
 * bytes, content types, invalid UTF-8, huge and deeply nested JSON, repeated and oversized fields,
 * odd path segments and odd headers at every endpoint. Every answer must be a 4xx with exactly the
 * contract's `{"error","error_description"}` body (a 2xx only where the input turned out valid):
 * never a 5xx, a stack trace, an SQL fragment or a hang; and the server answers normally afterwards.
 *
 * Requests go through raw `node:http` so that bytes, paths and headers reach the server unchanged.
 */
import { describe, expect, layer } from "@effect/vitest"
import { MAX_JSON_DEPTH } from "../src/domain/Json.js"
import { Effect, FastCheck as fc } from "effect"
import {
  bytesWithInvalidUtf8,
  contentType,
  expectErrorAnswer,
  expectSafeAnswer,
  headerBytes,
  hostileJson,
  hostileJsonDeep,
  hostileSegment,
  INVALID_UTF8,
  oddAuthorization
} from "./support/Hostile.js"
import { basicAuthorization, latin1, type RawRequest, type RawResponse } from "./support/Http.js"
import { ADMIN, Ready, expectHealthy, fixtureOnce, form, parse, send, servicePath, testServer } from "./support/HostileInput.js"

/** Bounded so the file stays fast. */
const RUNS = 60

/** Long strings shortened, so that a counterexample stays readable. */
const abbreviate = (value: unknown): string =>
  JSON.stringify(value, (_key, v) =>
    typeof v === "string" && v.length > 160
      ? `${v.slice(0, 80)}…(${v.length} chars)…${v.slice(-40)}`
      : v instanceof Uint8Array
      ? `<${v.length} bytes: ${Buffer.from(v).subarray(0, 60).toString("hex")}…>`
      : v)

/**
 * fast-check parameters for `it.effect.prop`: bounded runs, and a failure that reports the (shrunk)
 * counterexample briefly, with the seed, rather than whole 100 kB strings.
 */
const runs = <T>(numRuns = RUNS): { readonly fastCheck: fc.Parameters<T> } => ({
  fastCheck: {
    numRuns,
    reporter: (details: fc.RunDetails<T>) => {
      if (!details.failed) return
      const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)
      throw new Error(
        `property failed after ${details.numRuns} runs (seed ${details.seed}, path ${details.counterexamplePath}):\n` +
          `counterexample: ${abbreviate(details.counterexample)}\n${error.slice(0, 2000)}`
      )
    }
  }
})

/** In a generated case, stands for a value of the fixture (known only once the server runs). */
interface Own {
  readonly own: "profile" | "environment" | "uuid"
}

const fill = (f: Ready, value: string | Own): string => (typeof value === "string" ? value : f[value.own])

/** The fixture's own name (weight `ownWeight`) or a hostile segment. */
const segmentOr = (own: Own["own"], ownWeight: number) =>
  fc.oneof({ weight: ownWeight, arbitrary: fc.constant<string | Own>({ own }) }, { weight: 3, arbitrary: hostileSegment })

/** Requests whose headers the server refuses as too large (431) are not what these properties are about. */
const tooLarge = (request: RawRequest) => headerBytes(request) >= 14_000

const isTokenAnswer = (response: RawResponse) => response.status === 200 && typeof parse(response.text)?.access_token === "string"

/** How deeply a parsed JSON value nests arrays and objects (a scalar is 0). */
const nestingDepth = (value: unknown): number => {
  let depth = 0
  let level: Array<unknown> = [value]
  while (level.length > 0) {
    const next: Array<unknown> = []
    for (const item of level) if (typeof item === "object" && item !== null) next.push(...Object.values(item))
    if (level.some((item) => typeof item === "object" && item !== null)) depth++
    level = next
  }
  return depth
}

describe("hostile input: properties at every endpoint", () => {
  layer(testServer())((it) => {
    const fixture = fixtureOnce()
    /** A second fixture that the admin properties may change without touching the first. */
    const victim = fixtureOnce()

    /** The token request's fields, valued from the fixture when the case runs. */
    const FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const
    type Field = (typeof FIELDS)[number]
    const tokenBody = fc.oneof(
      // The valid fields, some dropped, some repeated, some oversized or replaced by hostile values.
      fc.record({
        kind: fc.constant("fields" as const),
        kept: fc.subarray([...FIELDS]),
        repeated: fc.subarray([...FIELDS], { maxLength: 2 }),
        extra: fc.array(
          fc.tuple(
            fc.constantFrom<string>(...FIELDS, "scope", "client_assertion", "", "=", "a[b]", "__proto__"),
            fc.oneof(
              fc.string({ maxLength: 30 }),
              fc.constantFrom("x".repeat(100_000), "\u0000", "\ud800", "%zz", "client_credentials ", "CLIENT_CREDENTIALS")
            )
          ),
          { maxLength: 3 }
        )
      }),
      // Raw percent-encoding: invalid escapes and invalid UTF-8 behind valid escapes.
      fc.record({
        kind: fc.constant("escape" as const),
        field: fc.constantFrom<Field>(...FIELDS),
        value: fc.constantFrom("%zz", "%", "%f", "%ff%fe", "%c3%28", "%ed%a0%80", "%00", "+%2B+")
      }),
      fc.record({
        kind: fc.constant("raw" as const),
        body: fc.oneof(
          {
            weight: 1,
            arbitrary: fc.constantFrom<string | Uint8Array>(
              "&&&",
              "=",
              "==&==",
              "a",
              "grant_type",
              "grant_type=&grant_type=",
              ";grant_type=client_credentials"
            )
          },
          { weight: 5, arbitrary: fc.uint8Array({ maxLength: 4096 }).map((b): string | Uint8Array => b) },
          {
            weight: 2,
            arbitrary: bytesWithInvalidUtf8.map((b): string | Uint8Array =>
              Buffer.concat([Buffer.from("grant_type=client_credentials&client_id="), b])
            )
          },
          { weight: 2, arbitrary: hostileJsonDeep }
        )
      })
    )
    type TokenBody = typeof tokenBody extends fc.Arbitrary<infer T> ? T : never
    const tokenBodyFor = (f: Ready, body: TokenBody): string | Uint8Array => {
      const value = (field: Field) => f.tokenFields[field]!
      switch (body.kind) {
        case "fields":
          return form([
            ...[...body.kept, ...body.repeated].map((field) => [field, value(field)] as const),
            ...body.extra
          ])
        case "escape":
          return FIELDS.map((k) => `${k}=${k === body.field ? body.value : encodeURIComponent(value(k))}`).join("&")
        case "raw":
          return body.body
      }
    }
    /** Stand for the fixture's own Basic credentials, right and wrong. */
    const BASIC_RIGHT = "\u0001basic-right"
    const BASIC_WRONG = "\u0001basic-wrong"

    it.effect.prop(
      "POST /oauth/token: arbitrary bytes, content types and Authorization headers → 4xx JSON error",
      { body: fc.option(tokenBody, { nil: undefined }), contentType, authorization: oddAuthorization([BASIC_RIGHT, BASIC_WRONG]) },
      ({ authorization, body, contentType }) =>
        Effect.gen(function*() {
          const f = yield* fixture
          const headers: Record<string, string> = {}
          if (contentType !== undefined) headers["content-type"] = contentType
          if (authorization !== undefined) {
            headers["authorization"] = authorization === BASIC_RIGHT
              ? basicAuthorization(f.clientId, f.clientSecret)
              : authorization === BASIC_WRONG
              ? basicAuthorization(f.clientId, "wrong")
              : authorization
          }
          const request: RawRequest = {
            method: "POST",
            path: "/oauth/token",
            headers,
            ...(body === undefined ? {} : { body: tokenBodyFor(f, body) })
          }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(f.port, request))
          expectSafeAnswer(request, response, isTokenAnswer)
          expect(response.headers["cache-control"]).toBe("no-store")
        }),
      runs(100)
    )

    /** Stand for the fixture's own tokens in generated Authorization headers. */
    const TOKENS = ["\u0001Bearer", "\u0001bearer", "\u0001Bearer-x", "\u0001Basic"] as const
    const authorizationWithToken = (f: Ready, authorization: string): string =>
      authorization === TOKENS[0]
        ? `Bearer ${f.token}`
        : authorization === TOKENS[1]
        ? `bearer ${f.token}`
        : authorization === TOKENS[2]
        ? `Bearer ${f.token}x`
        : authorization === TOKENS[3]
        ? `Basic ${f.token}`
        : authorization

    it.effect.prop(
      "POST /service/{p}/{e}/json/{uuid}: odd path segments, Authorization headers and bodies → 4xx JSON error",
      {
        profile: segmentOr("profile", 2),
        environment: segmentOr("environment", 2),
        uuid: segmentOr("uuid", 2),
        json: fc.constantFrom("json", "JSON", "xml", "%6Ason", ".."),
        authorization: oddAuthorization([...TOKENS]),
        contentType,
        body: fc.option(fc.oneof(hostileJson, fc.uint8Array({ maxLength: 4096 }).map((b): string | Uint8Array => b)), { nil: undefined })
      },
      ({ authorization, body, contentType, environment, json, profile, uuid }) =>
        Effect.gen(function*() {
          const f = yield* fixture
          const headers: Record<string, string> = {}
          if (contentType !== undefined) headers["content-type"] = contentType
          if (authorization !== undefined) headers["authorization"] = authorizationWithToken(f, authorization)
          const request: RawRequest = {
            method: "POST",
            path: `/service/${fill(f, profile)}/${fill(f, environment)}/${json}/${fill(f, uuid)}`,
            headers,
            ...(body === undefined ? {} : { body })
          }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(f.port, request))
          expectSafeAnswer(request, response, (r) => r.status === 200 && parse(r.text)?.service_uuid === f.uuid)
        }),
      runs()
    )

    it.effect.prop(
      "POST /service/… with a valid token: arbitrary bodies and content types → 200 for a JSON object (within the nesting limit), else 4xx",
      {
        contentType,
        body: fc.oneof(
          hostileJson,
          fc.uint8Array({ maxLength: 4096 }).map((b): string | Uint8Array => b),
          fc.constantFrom(...INVALID_UTF8).map((b): string | Uint8Array => Buffer.concat([Buffer.from("{\"a\":\""), b, Buffer.from("\"}")]))
        )
      },
      ({ body, contentType }) =>
        Effect.gen(function*() {
          const f = yield* fixture
          const headers: Record<string, string> = { authorization: `Bearer ${f.token}` }
          if (contentType !== undefined) headers["content-type"] = contentType
          const request: RawRequest = { method: "POST", path: servicePath(f), headers, body }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(f.port, request))
          const text = typeof body === "string" ? body : Buffer.from(body).toString("utf8")
          const value = parse(text)
          const isObject = typeof value === "object" && value !== null && !Array.isArray(value)
          if (isObject && nestingDepth(value) <= MAX_JSON_DEPTH) {
            expect(response.status, `${text.slice(0, 200)} → ${response.text.slice(0, 300)}`).toBe(200)
            expect(parse(response.text)).toMatchObject({ service_uuid: f.uuid, client_id: f.clientId })
          } else {
            expectErrorAnswer(request, response, [400])
          }
        }),
      runs()
    )

    const ADMIN_TEMPLATES = [
      ["GET", (p: string) => `/admin/profiles${p === "" ? "" : "?q=" + p}`],
      ["PUT", (p: string) => `/admin/profiles/${p}`],
      ["GET", (p: string) => `/admin/profiles/${p}`],
      ["POST", (p: string) => `/admin/profiles/${p}/save`],
      ["PUT", (p: string, e: string) => `/admin/profiles/${p}/environments/${e}`],
      ["POST", (p: string, e: string) => `/admin/profiles/${p}/environments/${e}/services`],
      ["PUT", (p: string, e: string, u: string) => `/admin/profiles/${p}/environments/${e}/services/${u}`],
      ["GET", (p: string, e: string, u: string) => `/admin/profiles/${p}/environments/${e}/services/${u}`],
      ["GET", (p: string, e: string, u: string) => `/admin/profiles/${p}/environments/${e}/services/${u}/credentials`],
      ["POST", (p: string, e: string, u: string) => `/admin/profiles/${p}/environments/${e}/services/${u}/credentials`],
      // Deletions only ever see hostile names, never the fixtures'.
      ["DELETE", (_p: string, _e: string, _u: string, c: string) => `/admin/profiles/${c}`],
      ["DELETE", (p: string, _e: string, _u: string, c: string) => `/admin/profiles/${p}x/environments/${c}`],
      ["DELETE", (p: string, e: string, _u: string, c: string) => `/admin/profiles/${p}/environments/${e}/services/${c}`],
      ["DELETE", (p: string, e: string, u: string, c: string) => `/admin/profiles/${p}/environments/${e}/services/${u}/credentials/${c}`]
    ] as const

    it.effect.prop(
      "every /admin JSON endpoint: odd segments, bodies, content types and Authorization → 4xx JSON error",
      {
        template: fc.constantFrom(...ADMIN_TEMPLATES),
        profile: segmentOr("profile", 1),
        environment: segmentOr("environment", 1),
        uuid: segmentOr("uuid", 1),
        other: hostileSegment,
        authorization: fc.oneof({ weight: 4, arbitrary: fc.constant(ADMIN) }, { weight: 1, arbitrary: oddAuthorization() }),
        contentType,
        // Deeply nested documents are sent by the explicit tests below.
        body: fc.option(hostileJson, { nil: undefined })
      },
      ({ authorization, body, contentType, environment, other, profile, template, uuid }) =>
        Effect.gen(function*() {
          const v = yield* victim
          const [method, path] = template
          const headers: Record<string, string> = {}
          if (contentType !== undefined) headers["content-type"] = contentType
          if (authorization !== undefined) headers["authorization"] = authorization
          const request: RawRequest = {
            method,
            path: path(fill(v, profile), fill(v, environment), fill(v, uuid), other),
            headers,
            ...(body === undefined ? {} : { body })
          }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(v.port, request))
          // Valid after all (e.g. an empty body is `{}`): a 2xx with a JSON document, or a 204.
          expectSafeAnswer(request, response, (r) =>
            authorization === ADMIN && (r.status === 204 ? r.text === "" : parse(r.text) !== undefined))
        }),
      runs()
    )

    it.effect.prop(
      "random paths and methods, with and without the admin token → 4xx JSON error (2xx only for real resources)",
      {
        method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "SEARCH", "PURGE"),
        prefix: fc.constantFrom(
          "",
          "/admin",
          "/admin/profiles",
          "/admin/assets",
          "/service",
          "/oauth",
          "/oauth/token",
          "/.well-known",
          "/healthz",
          "/openapi.yaml",
          "/%2e%2e",
          "//",
          "/./"
        ),
        segments: fc.array(hostileSegment, { maxLength: 4 }),
        query: fc.option(fc.constantFrom("?", "?%zz", "?a=%ff", "?__proto__[x]=1", "?a=" + "q".repeat(3000), "#frag", "?;;&&=="), {
          nil: undefined
        }),
        authorization: fc.oneof(fc.constant(ADMIN), oddAuthorization()),
        body: fc.option(hostileJson, { nil: undefined })
      },
      ({ authorization, body, method, prefix, query, segments }) =>
        Effect.gen(function*() {
          const f = yield* fixture
          const path = `${prefix}/${segments.join("/")}${query ?? ""}`
          const headers: Record<string, string> = { "content-type": "application/json" }
          if (authorization !== undefined) headers["authorization"] = authorization
          const request: RawRequest = { method, path, headers, ...(body === undefined ? {} : { body }) }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(f.port, request))
          // The one redirect there is: GET / leads to the profile editor.
          if (response.status === 302) {
            expect({ method, path: path.split("?")[0], location: response.headers["location"] }).toEqual({
              method: "GET",
              path: "/",
              location: "/admin"
            })
            return
          }
          expectSafeAnswer(request, response, () => method === "GET" || authorization === ADMIN)
        }),
      runs()
    )

    it.effect.prop(
      "discovery endpoints ignore odd headers, query strings and bodies → 200",
      {
        path: fc.constantFrom("/healthz", "/readyz", "/.well-known/jwks.json", "/.well-known/oauth-authorization-server", "/openapi.yaml"),
        query: fc.constantFrom("", "?", "?%zz", "?a=%ff%fe", "?x=" + "y".repeat(4000)),
        authorization: oddAuthorization(),
        contentType,
        body: fc.option(fc.uint8Array({ maxLength: 1024 }), { nil: undefined })
      },
      ({ authorization, body, contentType, path, query }) =>
        Effect.gen(function*() {
          const f = yield* fixture
          const headers: Record<string, string> = { accept: latin1("application/json, */*; q=0.1, tëxt/ü") }
          if (contentType !== undefined) headers["content-type"] = contentType
          if (authorization !== undefined) headers["authorization"] = authorization
          const request: RawRequest = { method: "GET", path: path + query, headers, ...(body === undefined ? {} : { body }) }
          if (tooLarge(request)) return
          const response = yield* Effect.promise(() => send(f.port, request))
          expect(response.status, `${path}${query} → ${response.text.slice(0, 200)}`).toBe(200)
        }),
      runs(30)
    )

    // After all of the above, the first fixture is untouched and the server answers normally.
    it.effect("the server still answers normally after the properties", () => Effect.flatMap(fixture, expectHealthy))
  })
})
