/**
 * Hostile input never breaks the server: property-based tests throw arbitrary
 * bytes, content types, invalid UTF-8, huge and deeply nested JSON, repeated and oversized fields,
 * odd path segments and odd headers at every endpoint. Every answer must be a 4xx with exactly the
 * contract's `{"error","error_description"}` body (a 2xx only where the input turned out valid):
 * never a 5xx, a stack trace, an SQL fragment or a hang; and the server answers normally afterwards.
 * Every endpoint that takes a body refuses one over the limit with 413, declared or chunked.
 *
 * Requests go through raw `node:http` so that bytes, paths and headers reach the server unchanged.
 */
import { describe, expect, layer } from "@effect/vitest"
import { MAX_JSON_DEPTH } from "../src/domain/Json.js"
import { SERVICE_VERSION } from "../src/config/Version.js"
import { Effect, FastCheck as fc } from "effect"
import { bytesWithInvalidUtf8, contentType, deepJson, expectErrorAnswer, expectSafeAnswer, headerBytes, hostileJson, hostileJsonDeep, hostileSegment, INVALID_UTF8, oddAuthorization } from "./support/Hostile.js"
import {
  basicAuthorization,
  formEncode,
  latin1,
  type RawRequest,
  rawRequest,
  type RawResponse
} from "./support/Http.js"
import {
  ADMIN_TOKEN,
  createFixture,
  type Fixture,
  issueToken,
  makeTestServer,
  serverPort,
  sharedFixture,
  tokenRequest
} from "../src/testing.js"

const MAX_BODY = 1024 * 1024
const TWO_MIB = 2 * MAX_BODY
const ADMIN = `Bearer ${ADMIN_TOKEN}`
/** Bounded so the file stays fast. */
const RUNS = 60

/** The server under test: failures of client authentication never lock the fixture out here. */
const testServer = () => makeTestServer({ config: { authFailureLimit: 1_000_000 } })

interface Ready extends Fixture {
  readonly port: number
  readonly token: string
}

/** A fixture (profile, environment, oauth service, credential, token) created once per server. */
const fixtureOnce = () =>
  sharedFixture(Effect.gen(function*() {
    const fixture = yield* createFixture()
    const token = yield* issueToken(fixture)
    return { ...fixture, token, port: yield* serverPort } satisfies Ready
  }))

const send = (port: number, request: RawRequest): Promise<RawResponse> => rawRequest(port, request)

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

const parse = (text: string): any => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const form = (fields: ReadonlyArray<readonly [string, string]>) =>
  fields.map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&")

const servicePath = (f: Pick<Fixture, "profile" | "environment" | "uuid">) =>
  `/service/${f.profile}/${f.environment}/json/${f.uuid}`

const adminPaths = (f: Pick<Fixture, "profile" | "environment" | "uuid">) => {
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
const expectHealthy = (ready: Ready) =>
  Effect.gen(function*() {
    const health = yield* Effect.promise(() => send(ready.port, { method: "GET", path: "/healthz" }))
    expect(health.status).toBe(200)
    expect(parse(health.text)).toEqual({ status: "ok", version: SERVICE_VERSION })
    const token = yield* tokenRequest(ready.tokenFields)
    expect(token.status).toBe(200)
    expect(token.body.token_type).toBe("Bearer")
  })

const isTokenAnswer = (response: RawResponse) =>
  response.status === 200 && typeof parse(response.text)?.access_token === "string"

// ---------------------------------------------------------------------------------------------

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
          { weight: 1, arbitrary: fc.constantFrom<string | Uint8Array>("&&&", "=", "==&==", "a", "grant_type", "grant_type=&grant_type=", ";grant_type=client_credentials") },
          { weight: 5, arbitrary: fc.uint8Array({ maxLength: 4096 }).map((b): string | Uint8Array => b) },
          { weight: 2, arbitrary: bytesWithInvalidUtf8.map((b): string | Uint8Array => Buffer.concat([Buffer.from("grant_type=client_credentials&client_id="), b])) },
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
        prefix: fc.constantFrom("", "/admin", "/admin/profiles", "/admin/assets", "/service", "/oauth", "/oauth/token", "/.well-known", "/healthz", "/openapi.yaml", "/%2e%2e", "//", "/./"),
        segments: fc.array(hostileSegment, { maxLength: 4 }),
        query: fc.option(fc.constantFrom("?", "?%zz", "?a=%ff", "?__proto__[x]=1", "?a=" + "q".repeat(3000), "#frag", "?;;&&=="), { nil: undefined }),
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

// ---------------------------------------------------------------------------------------------

describe("hostile input: explicit cases", () => {
  layer(testServer())((it) => {
    const fixture = fixtureOnce()

    /** Every endpoint that takes a body, with the headers it needs to get as far as reading it. */
    const bodyEndpoints = (f: Ready) => {
      const paths = adminPaths(f)
      const admin = { authorization: ADMIN, "content-type": "application/json" }
      return [
        { method: "POST", path: "/oauth/token", headers: { "content-type": "application/x-www-form-urlencoded" } },
        { method: "POST", path: servicePath(f), headers: { authorization: `Bearer ${f.token}`, "content-type": "application/json" } },
        { method: "PUT", path: paths.profile, headers: admin },
        { method: "POST", path: paths.save, headers: admin },
        { method: "PUT", path: paths.environment, headers: admin },
        { method: "POST", path: paths.services, headers: admin },
        { method: "PUT", path: paths.service, headers: admin },
        { method: "POST", path: paths.credentials, headers: admin }
      ] as const
    }

    const bigBody = (size: number, kind: "form" | "json") =>
      kind === "form"
        ? Buffer.from(`grant_type=client_credentials&client_id=${"a".repeat(size)}`).subarray(0, size)
        : Buffer.concat([Buffer.from("{\"name\":\""), Buffer.alloc(size - 17, "n"), Buffer.from("\",\"a\":1}")])

    it.effect("a 2 MiB body to every endpoint that takes one → 413 invalid_request", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const endpoint of bodyEndpoints(f)) {
          const request: RawRequest = { ...endpoint, body: bigBody(TWO_MIB, endpoint.path === "/oauth/token" ? "form" : "json") }
          const response = yield* Effect.promise(() => send(f.port, request))
          expect(expectErrorAnswer(request, response, [413]).error, endpoint.path).toBe("invalid_request")
        }
        yield* expectHealthy(f)
      }))

    it.effect("a 2 MiB body sent chunked (no Content-Length) to every endpoint that takes one → 413 invalid_request", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const endpoint of bodyEndpoints(f)) {
          const request: RawRequest = {
            ...endpoint,
            body: bigBody(TWO_MIB, endpoint.path === "/oauth/token" ? "form" : "json"),
            chunked: true
          }
          const response = yield* Effect.promise(() => send(f.port, request))
          expect(expectErrorAnswer(request, response, [413]).error, endpoint.path).toBe("invalid_request")
        }
        yield* expectHealthy(f)
      }))

    it.effect("one byte over 1 MiB → 413; exactly 1 MiB is read (and refused for what it says, not its size)", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const endpoint of bodyEndpoints(f)) {
          const kind = endpoint.path === "/oauth/token" ? "form" : "json"
          const over: RawRequest = { ...endpoint, body: bigBody(MAX_BODY + 1, kind) }
          expectErrorAnswer(over, yield* Effect.promise(() => send(f.port, over)), [413])
          const at: RawRequest = { ...endpoint, body: bigBody(MAX_BODY, kind) }
          const response = yield* Effect.promise(() => send(f.port, at))
          if (endpoint.path.startsWith("/service/")) {
            // {"name":"nnn…","a":1} is a JSON object: the echo service answers it.
            expect(response.status).toBe(200)
          } else {
            expect(expectErrorAnswer(at, response).error, endpoint.path).not.toBe("")
            expect(response.status, endpoint.path).not.toBe(413)
          }
        }
      }))

    it.effect("a huge JSON document (valid, over 1 MiB) to every admin endpoint and the service → 413", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const huge = JSON.stringify({ changes: Array.from({ length: 40_000 }, () => ({ op: "add_credential", environment: "production", service_uuid: f.uuid })) })
        expect(huge.length).toBeGreaterThan(MAX_BODY)
        for (const endpoint of bodyEndpoints(f).slice(1)) {
          const request: RawRequest = { ...endpoint, body: huge }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [413])
        }
      }))

    /** Endpoints whose body decodes to a struct with fields: save, POST services, PUT service. */
    const structEndpoints = (f: Ready) => {
      const paths = adminPaths(f)
      return bodyEndpoints(f).filter((e) => e.path === paths.save || e.path === paths.services || e.path === paths.service)
    }

    for (const depth of [10_000, 100_000, 500_000]) {
      for (const kind of ["array", "object"] as const) {
        const label = `${depth} levels of ${kind === "array" ? "[" : "{\"a\":"}`
        it.effect(`JSON nested ${label} → 4xx at the token and every admin endpoint, no crash`, () =>
          Effect.gen(function*() {
            const f = yield* fixture
            const struct = new Set(structEndpoints(f).map((e) => e.path))
            for (const endpoint of bodyEndpoints(f).filter((e) => !e.path.startsWith("/service/"))) {
              for (const body of [deepJson(depth, kind), deepJson(depth, kind, true)]) {
                // Over the limit is refused for its size; that is covered elsewhere.
                if (body.length > MAX_BODY) continue
                // A bare deep array at a struct endpoint is the known bug below.
                if (struct.has(endpoint.path) && kind === "array" && body.startsWith("[")) continue
                const json: RawRequest = { ...endpoint, headers: { ...endpoint.headers, "content-type": "application/json" }, body }
                expectErrorAnswer(json, yield* Effect.promise(() => send(f.port, json)))
              }
            }
            yield* expectHealthy(f)
          }))
      }
    }

    // Deeply nested JSON is refused before it is parsed (MAX_JSON_DEPTH): describing a decode
    // failure of such a value used to format it recursively and overflow the stack (500).
    it.effect("a bare array nested 10 000 levels deep at save / POST services / PUT service → 400", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const endpoint of structEndpoints(f)) {
          const request: RawRequest = { ...endpoint, body: deepJson(10_000, "array") }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
        }
      }))

    it.effect("a field holding an array nested 10 000 levels deep ({\"auth_type\":[[[…]]]}) → 400", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const paths = adminPaths(f)
        const deep = deepJson(10_000, "array")
        for (const [method, path, body] of [
          ["POST", paths.services, `{"auth_type":${deep}}`],
          ["PUT", paths.service, `{"auth_type":"oauth","name":${deep}}`],
          ["POST", paths.save, `{"changes":[{"op":${deep}}]}`]
        ] as const) {
          const request: RawRequest = { method, path, headers: { authorization: ADMIN, "content-type": "application/json" }, body }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
        }
      }))

    it.effect("the admin API answers normally after deeply nested bodies", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const request: RawRequest = { method: "PUT", path: adminPaths(f).service, headers: { authorization: ADMIN, "content-type": "application/json" }, body: "{\"auth_type\":\"oauth\",\"name\":\"billing\"}" }
        expect((yield* Effect.promise(() => send(f.port, request))).status).toBe(200)
        yield* expectHealthy(f)
      }))

    it.effect("JSON nested deeply but not an object (bare [[[…]]]) → 400 at the service endpoint", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const [service] = bodyEndpoints(f).filter((e) => e.path.startsWith("/service/"))
        for (const depth of [10_000, 100_000, 500_000]) {
          const request: RawRequest = { ...service!, body: deepJson(depth, "array") }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
        }
      }))

    // The echo handler answers the body back with JSON.stringify, which overflowed the stack on a
    // JSON object nested ~5 000 levels deep (500). Such bodies are now refused with 400.
    it.effect("a JSON object nested 10 000 levels deep at the service endpoint → 200 or a 4xx, never 500", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const [service] = bodyEndpoints(f).filter((e) => e.path.startsWith("/service/"))
        for (const body of [deepJson(10_000, "array", true), deepJson(10_000, "object")]) {
          const request: RawRequest = { ...service!, body }
          const response = yield* Effect.promise(() => send(f.port, request))
          expectSafeAnswer(request, response, (r) => r.status === 200)
        }
      }))

    it.effect("the service endpoint still answers normally after deeply nested bodies", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const [service] = bodyEndpoints(f).filter((e) => e.path.startsWith("/service/"))
        // Within the nesting limit (MAX_JSON_DEPTH = 64) a nested object is echoed as usual.
        const request: RawRequest = { ...service!, body: deepJson(60, "object") }
        const response = yield* Effect.promise(() => send(f.port, request))
        expect(response.status).toBe(200)
        yield* expectHealthy(f)
      }))

    it.effect("what Node's HTTP parser refuses (raw non-ASCII in the request line, an unknown method, headers over 16 KiB) → 4xx, server unharmed", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        // These never reach the application: Node answers a bare 400/431 itself (no JSON body).
        for (const request of [
          { method: "GET", path: `/admin/profiles/${latin1(Uint8Array.of(0xff))}`, headers: { authorization: ADMIN } },
          { method: "POST", path: `/service/${latin1("é")}/production/json/${f.uuid}` },
          { method: "GET", path: "/healthz", headers: { authorization: `Bearer ${"A".repeat(20_000)}` } },
          { method: "GET", path: `/healthz?${"q".repeat(20_000)}` },
          { method: "CONNECTX", path: "/healthz" }
        ] satisfies Array<RawRequest>) {
          const response = yield* Effect.promise(() => send(f.port, request))
          expect(response.status, `${request.method} ${request.path.slice(0, 60)}`).toBeGreaterThanOrEqual(400)
          expect(response.status).toBeLessThan(500)
          expect(response.text).not.toMatch(/\n\s+at\s/)
        }
        yield* expectHealthy(f)
      }))

    it.effect("repeated fields at the token endpoint → 400 invalid_request, however many", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const valid = form(Object.entries(f.tokenFields))
        for (const name of Object.keys(f.tokenFields)) {
          for (const times of [2, 1000]) {
            const extra = Array.from({ length: times - 1 }, () => `${name}=${encodeURIComponent(f.tokenFields[name]!)}`).join("&")
            const request: RawRequest = { method: "POST", path: "/oauth/token", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `${valid}&${extra}` }
            const answer = expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
            expect(answer.error).toBe("invalid_request")
          }
        }
      }))

    it.effect("50 000 unknown fields next to valid ones → still a token (200), quickly", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const junk = Array.from({ length: 50_000 }, (_, i) => `f${i}=${i}`).join("&")
        const request: RawRequest = {
          method: "POST",
          path: "/oauth/token",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: `${junk}&${form(Object.entries(f.tokenFields))}`
        }
        const response = yield* Effect.promise(() => send(f.port, request))
        expect(response.status, response.text).toBe(200)
        // A figure to read (the speed of the form parser belongs in `npm run bench`); the bound is
        // a hang's, far above any machine's time.
        console.info(`50 000 unknown fields: a token in ${response.ms} ms`)
        expect(response.ms).toBeLessThan(20_000)
      }))

    it.effect("oversized field values (500 KB client_id, client_secret, profile) → 4xx, never echoed", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const [name, status] of [["client_id", 401], ["client_secret", 401], ["profile", 400], ["environment", 400], ["service_uuid", 400], ["grant_type", 400]] as const) {
          const value = `${name}-` + "v".repeat(500_000)
          const request: RawRequest = {
            method: "POST",
            path: "/oauth/token",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: form(Object.entries({ ...f.tokenFields, [name]: value }))
          }
          const response = yield* Effect.promise(() => send(f.port, request))
          expectErrorAnswer(request, response, [status])
          expect(response.text).not.toContain("v".repeat(1000))
        }
      }))

    it.effect("invalid UTF-8 in every token field, raw and percent-encoded → 4xx JSON error", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const name of Object.keys(f.tokenFields)) {
          for (const bad of INVALID_UTF8) {
            for (const encoding of ["raw", "percent"] as const) {
              const value = encoding === "raw"
                ? Buffer.from(bad)
                : Buffer.from([...bad].map((b) => `%${b.toString(16).padStart(2, "0")}`).join(""))
              const parts = Object.entries(f.tokenFields).map(([k, v]) =>
                k === name ? Buffer.concat([Buffer.from(`${k}=`), value]) : Buffer.from(`${k}=${encodeURIComponent(v)}`))
              const body = Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [p] : [Buffer.from("&"), p])))
              const request: RawRequest = { method: "POST", path: "/oauth/token", headers: { "content-type": "application/x-www-form-urlencoded" }, body }
              expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)))
            }
          }
        }
      }))

    it.effect("invalid UTF-8 in admin JSON bodies and (percent-encoded) in path segments → 4xx JSON error", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const paths = adminPaths(f)
        for (const bad of INVALID_UTF8) {
          const json = Buffer.concat([Buffer.from("{\"auth_type\":\"oauth\",\"name\":\""), bad, Buffer.from("\"}")])
          for (const [method, path] of [["POST", paths.services], ["PUT", paths.service], ["PUT", paths.profile], ["POST", paths.save]] as const) {
            const request: RawRequest = { method, path, headers: { authorization: ADMIN, "content-type": "application/json" }, body: json }
            const response = yield* Effect.promise(() => send(f.port, request))
            // A name with U+FFFD in it is still a name: a service may be created or updated.
            expectSafeAnswer(request, response, (r) => path.includes("/services") && (r.status === 200 || r.status === 201))
          }
          const percent = [...bad].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("")
          for (const s of [percent, `a${percent}b`]) {
            for (const [method, path] of [
              ["GET", `/admin/profiles/${s}`],
              ["PUT", `/admin/profiles/${f.profile}/environments/${s}`],
              ["GET", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${s}`],
              ["POST", `/service/${s}/${f.environment}/json/${f.uuid}`],
              ["POST", `/service/${f.profile}/${f.environment}/json/${s}`],
              ["GET", `/admin/assets/${s}`]
            ] as const) {
              const request: RawRequest = { method, path, headers: { authorization: ADMIN, "content-type": "application/json" }, body: "{}" }
              expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)))
            }
          }
        }
      }))

    it.effect("traversal and bad percent-encoding in every path parameter → 4xx JSON error", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const s of ["..", "%2e%2e", "%2E%2e", ".%2E", "%00", "%zz", "%", "%2", "%2f..%2f", "..%5c..%5c", "a".repeat(2000), "%41".repeat(1000)]) {
          for (const [method, path] of [
            ["PUT", `/admin/profiles/${s}`],
            ["GET", `/admin/profiles/${s}`],
            ["DELETE", `/admin/profiles/${s}`],
            ["POST", `/admin/profiles/${s}/save`],
            ["PUT", `/admin/profiles/${f.profile}/environments/${s}`],
            ["DELETE", `/admin/profiles/${f.profile}/environments/${s}`],
            ["POST", `/admin/profiles/${f.profile}/environments/${s}/services`],
            ["PUT", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${s}`],
            ["DELETE", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${s}`],
            ["GET", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${s}/credentials`],
            ["POST", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${s}/credentials`],
            ["DELETE", `/admin/profiles/${f.profile}/environments/${f.environment}/services/${f.uuid}/credentials/${s}`],
            ["POST", `/service/${s}/${f.environment}/json/${f.uuid}`],
            ["POST", `/service/${f.profile}/${s}/json/${f.uuid}`],
            ["POST", `/service/${f.profile}/${f.environment}/json/${s}`],
            ["GET", `/admin/assets/${s}`],
            ["GET", `/admin/assets/..%2f..%2f..%2fpackage.json`],
            ["GET", `/admin/assets/${s}/..`]
          ] as const) {
            const headers = { authorization: path.startsWith("/service/") ? `Bearer ${f.token}` : ADMIN, "content-type": "application/json" }
            const request: RawRequest = { method, path, headers, ...(method === "PUT" || method === "POST" ? { body: method === "PUT" && path.includes("/services/") ? "{\"auth_type\":\"oauth\"}" : "{}" } : {}) }
            const response = yield* Effect.promise(() => send(f.port, request))
            expectErrorAnswer(request, response)
            expect(response.text).not.toMatch(/"name"\s*:\s*"service-auth"|BEGIN (RSA )?PRIVATE KEY/)
          }
        }
        yield* expectHealthy(f)
      }))

    it.effect("odd Authorization headers at the service, token and admin endpoints → 4xx JSON error with the right challenge", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const odd = [
          "Bearer",
          "Bearer ",
          `Bearer ${f.token} ${f.token}`,
          `Bearer ${f.token},Bearer ${f.token}`,
          `Bearer ${"A".repeat(10_240)}`,
          `Bearer ${f.token.replace(/\.[^.]*$/, "." + "A".repeat(10_000))}`,
          latin1(`Bearer ${f.token}é`),
          latin1("Bearer 🔑"),
          "Basic " + "=".repeat(100),
          "MAC id=\"h480djs93hd8\"",
          "x".repeat(10_000)
        ]
        for (const authorization of odd) {
          const service: RawRequest = { method: "POST", path: servicePath(f), headers: { authorization, "content-type": "application/json" }, body: "{}" }
          const s = yield* Effect.promise(() => send(f.port, service))
          expectErrorAnswer(service, s, [400, 401])
          expect(s.headers["www-authenticate"]).toMatch(/^Bearer realm="service"/)
          const presented = authorization.replace(/^\S+\s*/, "").slice(0, 200)
          if (presented.length >= 8) expect(s.text).not.toContain(presented)

          const token: RawRequest = {
            method: "POST",
            path: "/oauth/token",
            headers: { authorization, "content-type": "application/x-www-form-urlencoded" },
            body: form(Object.entries(f.tokenFields).filter(([k]) => k !== "client_secret"))
          }
          expectErrorAnswer(token, yield* Effect.promise(() => send(f.port, token)), [400, 401])

          const admin: RawRequest = { method: "GET", path: "/admin/profiles", headers: { authorization } }
          const a = yield* Effect.promise(() => send(f.port, admin))
          expect(expectErrorAnswer(admin, a, [401]).error).toBe("unauthorized")
        }
      }))

    it.effect("multipart and charset-labelled bodies at the token endpoint → 400 (no fields), never a 5xx", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const multipart = `--b\r\nContent-Disposition: form-data; name="grant_type"\r\n\r\nclient_credentials\r\n--b--\r\n`
        for (const [type, body] of [
          ["multipart/form-data; boundary=b", multipart],
          ["multipart/form-data; boundary=other", multipart],
          ["multipart/form-data", multipart],
          ["multipart/form-data; boundary=\"", "--\"\r\n\r\n"],
          ["application/json; charset=utf-16", Buffer.from(JSON.stringify(f.tokenFields), "utf16le")],
          ["application/x-www-form-urlencoded; charset=utf-16", Buffer.from(form(Object.entries(f.tokenFields)), "utf16le")]
        ] as const) {
          const request: RawRequest = { method: "POST", path: "/oauth/token", headers: { "content-type": type }, body }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
        }
        // The same multipart bodies at the admin and service endpoints.
        for (const path of [adminPaths(f).services, servicePath(f)]) {
          const authorization = path.startsWith("/service/") ? `Bearer ${f.token}` : ADMIN
          const request: RawRequest = { method: "POST", path, headers: { authorization, "content-type": "multipart/form-data; boundary=b" }, body: multipart }
          expectErrorAnswer(request, yield* Effect.promise(() => send(f.port, request)), [400])
        }
      }))

    it.effect("afterwards the server answers normally", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        yield* expectHealthy(f)
        const call: RawRequest = { method: "POST", path: servicePath(f), headers: { authorization: `Bearer ${f.token}`, "content-type": "application/json" }, body: "{\"ok\":true}" }
        const response = yield* Effect.promise(() => send(f.port, call))
        expect(response.status).toBe(200)
        expect(parse(response.text)).toMatchObject({ body: { ok: true } })
      }))
  })
})
