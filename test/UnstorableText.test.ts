/**
 * Text that storage cannot hold never reaches it: NUL (PostgreSQL text cannot hold U+0000), other
 * C0 and C1 controls, unpaired surrogates and over-long values, in every field of every endpoint,
 * on the memory, embedded and PostgreSQL storages alike. A value that can never exist takes the
 * contract's row for it: an unknown client at the token endpoint (401 after the target checks, with
 * the Basic challenge when Basic was used), 404 for a client id in an admin path, 400 for a payload.
 * Never a 5xx, and the server answers normally afterwards.
 */
import { describe, expect, layer } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, FastCheck as fc, Layer, Logger } from "effect"
import { AdminTokenStore } from "../src/admin/AdminTokenStore.js"
import { TrustedIssuerStore } from "../src/federation/TrustedIssuerStore.js"
import { AuditTrail } from "../src/storage/AuditTrail.js"
import { localGuard } from "../src/catalogue/CredentialRepoCache.js"
import * as CatalogueInMemory from "../src/catalogue/CatalogueInMemory.js"
import * as Storage from "../src/storage/Storage.js"
import { FailureCounts } from "../src/token/FailureCounts.js"
import { ServerKeyStore } from "../src/keys/ServerKeyStore.js"
import { describeWithPostgres, embeddedStorage, memoryStorage, postgresStorage } from "./support/Databases.js"
import { expectErrorAnswer } from "./support/Hostile.js"
import { basicAuthorization, formEncode, latin1, type RawRequest, rawRequest } from "./support/Http.js"
import {
  admin,
  ADMIN_TOKEN,
  createFixture,
  type Fixture,
  makeTestServer,
  serverPort,
  type TestStorage,
  tokenRequest,
  uniqueName
} from "../src/testing.js"

/** One of each kind of character storage refuses or would silently change, alone and inside text. */
const UNSTORABLE = [
  "\u0000",
  "a\u0000b",
  "\u0001",
  "\t",
  "\n",
  "\u001b",
  "\u001f",
  "\u007f",
  "\u0085",
  "\u009f",
  "\ud800",
  "x\udfffy"
] as const
/** Unstorable text or just too long, for the property. */
const hostileText = fc.oneof(
  fc.constantFrom(...UNSTORABLE, "x".repeat(5_000)),
  fc.tuple(fc.string({ maxLength: 8 }), fc.constantFrom(...UNSTORABLE), fc.string({ maxLength: 8 }))
    .map(([a, b, c]) => a + b + c)
)

const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }
const JSON_ADMIN = { ...ADMIN, "content-type": "application/json" }
const FORM = { "content-type": "application/x-www-form-urlencoded" }

const INVALID_CLIENT = { error: "invalid_client", error_description: "Invalid client credentials" }
const MISSING = { error: "invalid_request", error_description: "Missing required parameters" }

/** A path segment carrying any text, percent-encoded byte by byte (lone surrogates become U+FFFD). */
const segment = (value: string) => formEncode(value)

const form = (fields: Record<string, string>) => Object.entries(fields).map(([name, value]) => `${name}=${formEncode(value)}`).join("&")

const expectAnswer = (
  request: RawRequest,
  response: { readonly status: number; readonly text: string; readonly headers: Readonly<Record<string, string>> },
  status: number,
  body?: unknown
) => {
  expectErrorAnswer(request, { ...response, ms: 0 }, [status])
  if (body !== undefined) expect(JSON.parse(response.text)).toEqual(body)
}

const storageSuite = (storage: Layer.Layer<TestStorage, unknown>) =>
  layer(makeTestServer({ storage, config: { authFailureLimit: 1_000_000 } }), { timeout: 60_000 })((it) => {
    let ready: (Fixture & { readonly port: number }) | undefined
    const fixture = Effect.gen(function*() {
      if (ready === undefined) ready = { ...(yield* createFixture()), port: yield* serverPort }
      return ready
    })
    const send = (request: RawRequest) => Effect.promise(() => rawRequest(ready!.port, request))
    const adminPaths = (f: Fixture) => ({
      profile: `/admin/profiles/${f.profile}`,
      environment: `/admin/profiles/${f.profile}/environments/${f.environment}`,
      services: `/admin/profiles/${f.profile}/environments/${f.environment}/services`,
      service: f.servicePath,
      credentials: `${f.servicePath}/credentials`,
      save: `/admin/profiles/${f.profile}/save`
    })

    it.effect("token endpoint: a client id with unstorable text is an unknown client (401), after the target checks", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const bad of UNSTORABLE) {
          for (const clientId of [bad, f.clientId + bad, bad + f.clientId]) {
            // client_secret_post
            const post: RawRequest = {
              method: "POST",
              path: "/oauth/token",
              headers: FORM,
              body: form({ ...f.tokenFields, client_id: clientId })
            }
            const postAnswer = yield* send(post)
            expectAnswer(post, postAnswer, 401, INVALID_CLIENT)
            expect(postAnswer.headers["www-authenticate"]).toBeUndefined()
            // client_secret_basic
            const { client_id: _, client_secret: __, ...target } = f.tokenFields
            const basic: RawRequest = {
              method: "POST",
              path: "/oauth/token",
              headers: { ...FORM, authorization: basicAuthorization(clientId, f.clientSecret) },
              body: form(target)
            }
            const basicAnswer = yield* send(basic)
            expectAnswer(basic, basicAnswer, 401, INVALID_CLIENT)
            expect(basicAnswer.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
            // The target is checked first: an unknown profile is still row 4.
            const unknownTarget: RawRequest = {
              method: "POST",
              path: "/oauth/token",
              headers: FORM,
              body: form({ ...f.tokenFields, client_id: clientId, profile: "no-such-profile" })
            }
            expectAnswer(unknownTarget, yield* send(unknownTarget), 400, MISSING)
          }
        }
        // Raw NUL bytes in the Basic credentials, not percent-encoded.
        const raw: RawRequest = {
          method: "POST",
          path: "/oauth/token",
          headers: {
            ...FORM,
            authorization: `Basic ${Buffer.from(`${f.clientId}\u0000:${f.clientSecret}`).toString("base64")}`
          },
          body: form({ grant_type: "client_credentials", profile: f.profile, environment: f.environment, service_uuid: f.uuid })
        }
        const rawAnswer = yield* send(raw)
        expectAnswer(raw, rawAnswer, 401, INVALID_CLIENT)
        expect(rawAnswer.headers["www-authenticate"]).toBe(`Basic realm="oauth"`)
      }))

    it.effect("token endpoint: unstorable text in every other field answers its contract row", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const bad of UNSTORABLE) {
          const cases: ReadonlyArray<readonly [string, number, unknown]> = [
            ["grant_type", 400, { error: "unsupported_grant_type", error_description: "Only client_credentials grant type is supported" }],
            ["client_secret", 401, INVALID_CLIENT],
            ["profile", 400, MISSING],
            ["environment", 400, MISSING],
            ["service_uuid", 400, MISSING]
          ]
          for (const [field, status, body] of cases) {
            const request: RawRequest = {
              method: "POST",
              path: "/oauth/token",
              headers: FORM,
              body: form({ ...f.tokenFields, [field]: f.tokenFields[field] + bad })
            }
            expectAnswer(request, yield* send(request), status, body)
          }
        }
      }))

    it.effect("admin payloads with unstorable text → 400 invalid_request; lookups of ids that cannot exist → 400 or 404", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const paths = adminPaths(f)
        for (const bad of UNSTORABLE) {
          const payloads: ReadonlyArray<unknown> = [
            { name: bad, auth_type: "oauth" },
            { name: `billing${bad}`, auth_type: "oauth" },
            { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: `http://127.0.0.1:1/${bad}` } },
            { name: "billing", auth_type: "oauth", handler: { type: "proxy", url: `http://127.0.0.1:1/?q=${bad}` } },
            { name: "billing", auth_type: `oauth${bad}` },
            { name: "billing", auth_type: "oauth", handler: { type: `echo${bad}` } }
          ]
          for (const payload of payloads) {
            for (const [method, path] of [["POST", paths.services], ["PUT", paths.service]] as const) {
              const request: RawRequest = { method, path, headers: JSON_ADMIN, body: JSON.stringify(payload) }
              expectAnswer(request, yield* send(request), 400)
              expect(JSON.parse((yield* send(request)).text).error).toBe("invalid_request")
            }
          }
          const saves: ReadonlyArray<unknown> = [
            { changes: [{ op: "add_credential", environment: f.environment + bad, service_uuid: f.uuid }] },
            { changes: [{ op: "add_credential", environment: f.environment, service_uuid: f.uuid + bad }] },
            { changes: [{ op: "remove_credential", environment: f.environment, service_uuid: f.uuid, client_id: f.clientId + bad }] },
            { changes: [{ op: `add_credential${bad}`, environment: f.environment, service_uuid: f.uuid }] }
          ]
          for (const save of saves) {
            const request: RawRequest = { method: "POST", path: paths.save, headers: JSON_ADMIN, body: JSON.stringify(save) }
            expectAnswer(request, yield* send(request), 400)
          }
          const lookups: ReadonlyArray<readonly [RawRequest["method"], string, number]> = [
            ["GET", `/admin/profiles/${segment(f.profile + bad)}`, 400],
            ["PUT", `/admin/profiles/${segment(f.profile + bad)}`, 400],
            ["DELETE", `/admin/profiles/${segment(f.profile + bad)}`, 400],
            ["PUT", `${paths.profile}/environments/${segment(f.environment + bad)}`, 400],
            ["DELETE", `${paths.profile}/environments/${segment(f.environment + bad)}`, 400],
            ["GET", `${paths.environment}/services/${segment(f.uuid + bad)}`, 400],
            ["DELETE", `${paths.environment}/services/${segment(f.uuid + bad)}`, 400],
            ["GET", `${paths.environment}/services/${segment(f.uuid + bad)}/credentials`, 400],
            ["DELETE", `${paths.credentials}/${segment(f.clientId + bad)}`, 404],
            ["DELETE", `${paths.credentials}/${segment(bad)}`, 404]
          ]
          for (const [method, path, status] of lookups) {
            const request: RawRequest = { method, path: latin1(path), headers: ADMIN }
            expectAnswer(request, yield* send(request), status)
          }
        }
        // Nothing was changed by any of it.
        const service = yield* send({ method: "GET", path: paths.service, headers: ADMIN })
        expect(service.status).toBe(200)
        expect(JSON.parse(service.text)).toMatchObject({ name: "billing", auth_type: "oauth", handler: { type: "echo" } })
      }))

    it.effect("service call: unstorable text in a path segment → 404 not_found", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        for (const bad of UNSTORABLE) {
          for (
            const path of [
              `/service/${segment(f.profile + bad)}/${f.environment}/json/${f.uuid}`,
              `/service/${f.profile}/${segment(f.environment + bad)}/json/${f.uuid}`,
              `/service/${f.profile}/${f.environment}/json/${segment(f.uuid + bad)}`
            ]
          ) {
            const request: RawRequest = { method: "POST", path, headers: { "content-type": "application/json" }, body: "{}" }
            expectAnswer(request, yield* send(request), 404)
          }
        }
      }))

    it.effect("property: unstorable or over-long text in any field of any endpoint → never a 5xx", () =>
      Effect.gen(function*() {
        const f = yield* fixture
        const paths = adminPaths(f)
        const tokenFieldNames = Object.keys(f.tokenFields)
        const requestFor = fc.oneof(
          fc.tuple(fc.constantFrom(...tokenFieldNames), hostileText, fc.boolean()).map(([field, value, basic]): RawRequest => {
            const fields = { ...f.tokenFields, [field]: value }
            if (!basic) return { method: "POST", path: "/oauth/token", headers: FORM, body: form(fields) }
            const { client_id, client_secret, ...rest } = fields
            return {
              method: "POST",
              path: "/oauth/token",
              headers: { ...FORM, authorization: basicAuthorization(client_id!, client_secret!) },
              body: form(rest)
            }
          }),
          fc.tuple(fc.constantFrom("name", "url", "auth_type"), hostileText, fc.constantFrom("POST", "PUT") as fc.Arbitrary<"POST" | "PUT">)
            .map(([field, value, method]): RawRequest => ({
              method,
              path: method === "POST" ? paths.services : paths.service,
              headers: JSON_ADMIN,
              body: JSON.stringify(
                field === "url"
                  ? { auth_type: "oauth", handler: { type: "proxy", url: `http://127.0.0.1:1/${value}` } }
                  : { name: "billing", auth_type: "oauth", [field]: value }
              )
            })),
          fc.tuple(fc.constantFrom("environment", "service_uuid", "client_id", "op"), hostileText).map(([field, value]): RawRequest => ({
            method: "POST",
            path: paths.save,
            headers: JSON_ADMIN,
            body: JSON.stringify({
              changes: [{
                op: "remove_credential",
                environment: f.environment,
                service_uuid: f.uuid,
                client_id: f.clientId,
                [field]: value
              }]
            })
          })),
          fc.tuple(
            fc.constantFrom(
              (v: string) => `/admin/profiles/${v}`,
              (v: string) => `${paths.profile}/environments/${v}`,
              (v: string) => `${paths.environment}/services/${v}`,
              (v: string) => `${paths.credentials}/${v}`,
              (v: string) => `/service/${v}/${f.environment}/json/${f.uuid}`,
              (v: string) => `/service/${f.profile}/${v}/json/${f.uuid}`,
              (v: string) => `/service/${f.profile}/${f.environment}/json/${v}`
            ),
            hostileText.map((v) => segment(v).slice(0, 3_000)),
            fc.constantFrom("GET", "PUT", "POST", "DELETE") as fc.Arbitrary<RawRequest["method"]>
          ).map(([path, value, method]): RawRequest => ({
            method,
            path: path(value),
            headers: JSON_ADMIN,
            ...(method === "GET" || method === "DELETE" ? {} : { body: "{}" })
          }))
        )
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(requestFor, async (request) => {
              const response = await rawRequest(f.port, request)
              expect(response.status, `${request.method} ${request.path.slice(0, 200)} → ${response.text.slice(0, 200)}`)
                .toBeLessThan(500)
            }),
            { numRuns: 150 }
          )
        )
        // Still healthy: a real token request succeeds.
        expect((yield* tokenRequest(f.tokenFields)).status).toBe(200)
      }))
  })

describe("unstorable text: memory storage", () => {
  storageSuite(memoryStorage)
})

describe("unstorable text: embedded database", () => {
  storageSuite(embeddedStorage())
})

describeWithPostgres("unstorable text: PostgreSQL", () => {
  storageSuite(postgresStorage())
})

describe("an unexpected storage failure", () => {
  const logged: Array<string> = []
  const INPUT = "name-the-client-sent"
  // A repository whose write fails the way a statement refused for its data would, quoting the value.
  const failingStorage = Layer.mergeAll(
    Layer.merge(AdminTokenStore.layerMemory, TrustedIssuerStore.layerMemory).pipe(Layer.provideMerge(Layer.scopedContext(
      Effect.gen(function*() {
        const { auditTrail, store } = yield* CatalogueInMemory.make
        const failing = Effect.succeed({
          ...store,
          writes: {
            ...store.writes,
            putService: () =>
              Effect.die(
                new SqlError({
                  cause: Object.assign(new Error(`invalid byte sequence for encoding "UTF8": ${INPUT}`), { code: "22021" }),
                  message: "Failed to execute statement"
                })
              )
          }
        })
        return Context.add(yield* Storage.makeCatalogue(failing, Effect.sync(localGuard)), AuditTrail, auditTrail)
      })
    ))),
    ServerKeyStore.layerMemory,
    FailureCounts.layerLocal
  )
  const capture = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => void logged.push(Array.isArray(message) ? message.join(" ") : String(message)))
  )

  layer(makeTestServer({ storage: failingStorage }).pipe(Layer.provide(capture)))((it) => {
    it.effect("answers a generic 500 and is logged once, with its SQLSTATE and without the input", () =>
      Effect.gen(function*() {
        const profile = uniqueName("profile")
        yield* admin.put(`/admin/profiles/${profile}`)
        yield* admin.put(`/admin/profiles/${profile}/environments/production`)
        logged.length = 0
        const response = yield* admin.post(`/admin/profiles/${profile}/environments/production/services`, {
          name: INPUT,
          auth_type: "oauth"
        })
        expect(response.status).toBe(500)
        expect(response.body).toEqual({ error: "server_error", error_description: "Internal server error" })
        const failures = logged.filter((line) => line.includes("Unhandled failure"))
        expect(failures).toHaveLength(1)
        expect(failures[0]).toContain("SqlError (SQLSTATE 22021)")
        expect(logged.join("\n")).not.toContain(INPUT)
        expect(logged.join("\n")).not.toContain(profile)
      }))
  })
})
