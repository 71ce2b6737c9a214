/**
 * The admin API's client for the command line: made by `HttpApiClient` from the contract's `HttpApi`
 * (`server/Api.ts`), so paths, payloads and answers are the server's own schemas, with the admin token
 * added to every request. Every way a call can go wrong is mapped once, in `describeFailure`, to a
 * typed failure whose `message` is what the operator reads: the server's `error_description` for
 * an answer outside 2xx, a plain sentence for a server that cannot be reached, is not service-auth,
 * or does not answer in time. What it offers, method by method: `AdminClientShape.ts`.
 */
import {
  FetchHttpClient,
  HttpClient,
  HttpClientError,
  HttpApiClient,
  type HttpApiError,
  HttpClientRequest,
  type HttpClientResponse
} from "@effect/platform"
import { Context, Duration, Effect, FiberRef, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { AuditQueryParams } from "../admin/AdminApi.js"
import { Api } from "../server/Api.js"
import { NewAdminTokenRequest } from "../admin/AdminTokensApi.js"
import { describeRequestIssues } from "../admin/DecodeFailure.js"
import { FederatedCredentialInput } from "../domain/FederatedCredentialBodies.js"
import { TrustedIssuerName } from "../domain/FederatedCredential.js"
import { parseRfc3339 } from "../domain/Time.js"
import { type ServiceError, wireOf } from "../domain/Errors.js"
import type { ClientId, ProfileId } from "../domain/Identifiers.js"
import { ServiceInput } from "../domain/Models.js"
import { TrustedIssuerInput } from "../domain/TrustedIssuers.js"
import { type AdminCallError, AdminApiError, type AdminSetupError, ServerUnreachable, UnexpectedAnswer } from "./AdminClientErrors.js"
import type { AdminClientShape, EnvironmentAddress, ServiceAddress } from "./AdminClientShape.js"
import { adminTokenFor, type AdminTokenInUse } from "./AdminTokenSource.js"
import { CHECK_ADDRESS, InvalidServerUrl, parseServerUrl, transportProblem } from "./ServerAddress.js"

/** Where the server is when neither `--url` nor `SERVICE_AUTH_URL` says. */
export const DEFAULT_SERVER_URL = "http://localhost:3000"

/** How long one request may take; the server itself answers 503 within 1.5 s when its database is away. */
const REQUEST_TIMEOUT = Duration.seconds(30)

const WireError = Schema.Struct({ error: Schema.String, error_description: Schema.String })

export class AdminClient extends Context.Tag("service-auth/cli/AdminClient")<AdminClient, AdminClientShape>() {
  /**
   * The client for the server at `url`, authenticated with `ADMIN_TOKEN` from the environment (never
   * from the command line, where `ps` would show it).
   */
  static readonly layer = (url: string): Layer.Layer<AdminClient, AdminSetupError> =>
    Layer.effect(
      AdminClient,
      Effect.gen(function*() {
        const base = yield* parseServerUrl(url)
        const token = yield* adminTokenFor(base)
        return makeAdminClient(base, token, yield* makeApiClient(base, token.token))
      })
    ).pipe(Layer.provide(FetchHttpClient.layer))

  /**
   * The client for the server at `url` with an admin token the caller holds: for a program that
   * embeds the client (exported by the package's index) and has its token from its own secrets.
   */
  static readonly layerWithToken = (url: string, token: Redacted.Redacted): Layer.Layer<AdminClient, InvalidServerUrl> =>
    Layer.effect(
      AdminClient,
      Effect.gen(function*() {
        const base = yield* parseServerUrl(url)
        return makeAdminClient(base, { token, source: "the program embedding the client" }, yield* makeApiClient(base, token))
      })
    ).pipe(Layer.provide(FetchHttpClient.layer))
}

/** The answer to the call under way in this fiber, kept to describe a body the client could not decode. */
const currentAnswer = FiberRef.unsafeMake<Option.Option<HttpClientResponse.HttpClientResponse>>(Option.none())

/**
 * The contract's client for the server at `baseUrl`, sending the admin token with every request:
 * the admin groups only, since building a group's client compiles every endpoint's schemas and the
 * CLI starts for one or two calls.
 */
const makeApiClient = (baseUrl: string, token: Redacted.Redacted) =>
  Effect.gen(function*() {
    const httpClient = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest(HttpClientRequest.bearerToken(token)),
      HttpClient.tap((response) => FiberRef.set(currentAnswer, Option.some(response)))
    )
    return {
      profiles: yield* HttpApiClient.group(Api, { group: "profiles", httpClient, baseUrl }),
      services: yield* HttpApiClient.group(Api, { group: "services", httpClient, baseUrl }),
      credentialIntrospection: yield* HttpApiClient.group(Api, { group: "credentialIntrospection", httpClient, baseUrl }),
      audit: yield* HttpApiClient.group(Api, { group: "audit", httpClient, baseUrl }),
      adminTokens: yield* HttpApiClient.group(Api, { group: "adminTokens", httpClient, baseUrl }),
      session: yield* HttpApiClient.group(Api, { group: "session", httpClient, baseUrl }),
      trustedIssuers: yield* HttpApiClient.group(Api, { group: "trustedIssuers", httpClient, baseUrl })
    }
  })

type ApiClient = Effect.Effect.Success<ReturnType<typeof makeApiClient>>

/**
 * Every way a call of the generated client fails: the API's typed errors (with HttpApi's own decode
 * error, which this server never answers: it words its 400s as `invalid_request`), transport, decoding.
 */
type ClientFailure =
  | ServiceError
  | HttpApiError.HttpApiDecodeError
  | HttpClientError.HttpClientError
  | ParseResult.ParseError

/** The contract's refusal of a request, as the server words it in its 400 answer. */
const invalidRequest = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>) =>
  new AdminApiError({ status: 400, error: "invalid_request", message: describeRequestIssues(issues) })

const refusedRequest = (error: ParseResult.ParseError) => invalidRequest(ParseResult.ArrayFormatter.formatErrorSync(error))

/**
 * Checks what the CLI is about to send with the schema the server decodes it with, so that a value
 * the server would refuse is refused here in the server's words, and the client gets the decoded value.
 */
/** `--expires-at` as the API reads it (`parseRfc3339`); an invalid date, refused when encoded, otherwise. */
const expiryDate = (expiresAt: string) => new Date(parseRfc3339(expiresAt) ?? Number.NaN)

const checkedRequest = <A, I>(schema: Schema.Schema<A, I>, wire: I): Effect.Effect<A, AdminApiError> =>
  Effect.mapError(Schema.decodeUnknown(schema)(wire), refusedRequest)

const makeAdminClient = (
  baseUrl: string,
  { source }: AdminTokenInUse,
  api: ApiClient
): AdminClientShape => {
  const unreachable = (reason: string, hint = CHECK_ADDRESS) =>
    new ServerUnreachable({ message: `cannot reach the service-auth server at ${baseUrl}: ${reason} (${hint})` })

  const notOurs = (response: HttpClientResponse.HttpClientResponse, what: string) =>
    new UnexpectedAnswer({
      status: response.status,
      message: `${response.request.method} ${response.request.url} answered ${response.status}${what}: ` +
        `is ${baseUrl} a service-auth server?`
    })

  const redirectOf = (response: HttpClientResponse.HttpClientResponse) => {
    const location = response.headers["location"]
    return location === undefined ? "" : ` (a redirect to ${location})`
  }

  const apiError = (status: number, wire: typeof WireError.Type) =>
    new AdminApiError({
      status,
      error: wire.error,
      // A refused token: say which one was sent, since the CLI may have picked it up by itself.
      message: status === 401
        ? `${wire.error_description}: the CLI sent the admin token from ${source}; ` +
          `is it the one of the server at ${baseUrl}?`
        : wire.error_description
    })

  /** An answer with a status the endpoint does not declare: the contract's error body, or not ours. */
  const undeclaredAnswer = (
    response: HttpClientResponse.HttpClientResponse
  ): Effect.Effect<never, AdminCallError> =>
    Effect.flatMap(
      Effect.mapError(response.text, () => unreachable("the connection closed in the middle of the answer")),
      (text) =>
        Option.match(Schema.decodeUnknownOption(WireError)(parseJson(text)), {
          onNone: (): Effect.Effect<never, AdminCallError> => Effect.fail(notOurs(response, redirectOf(response))),
          onSome: (wire) => Effect.fail(apiError(response.status, wire))
        })
    )

  /** The one place a failure of the generated client becomes what the operator reads. */
  const describeFailure = (
    failure: ClientFailure,
    answer: Option.Option<HttpClientResponse.HttpClientResponse>
  ): Effect.Effect<never, AdminCallError> => {
    if (HttpClientError.isHttpClientError(failure)) {
      if (failure._tag === "RequestError") {
        const problem = transportProblem(failure.cause)
        return Effect.fail(unreachable(problem.reason, problem.hint))
      }
      // A status the endpoint does not declare fails without a cause; a body that broke off, with one.
      return failure.cause === undefined
        ? undeclaredAnswer(failure.response)
        : Effect.fail(unreachable("the connection closed in the middle of the answer"))
    }
    if (ParseResult.isParseError(failure)) {
      return Option.match(answer, {
        // Nothing was sent: the request itself is not the contract's.
        onNone: () => Effect.fail(refusedRequest(failure)),
        onSome: (response) =>
          Effect.fail(notOurs(
            response,
            response.status >= 200 && response.status < 300 ? " with a body of an unexpected shape" : redirectOf(response)
          ))
      })
    }
    if (failure._tag === "HttpApiDecodeError") {
      return Effect.fail(invalidRequest(failure.issues))
    }
    const wire = wireOf(failure)
    return Effect.fail(apiError(wire.status, wire.body))
  }

  /** One call of the generated client, its failure described, within the request timeout. */
  const call = <A>(request: (api: ApiClient) => Effect.Effect<A, ClientFailure>): Effect.Effect<A, AdminCallError> =>
    request(api).pipe(
      Effect.catchAll((failure) => Effect.flatMap(FiberRef.get(currentAnswer), (answer) => describeFailure(failure, answer))),
      Effect.locally(currentAnswer, Option.none()),
      // A redirect would carry the token elsewhere; the admin API never redirects.
      Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }),
      Effect.timeoutFail({
        duration: REQUEST_TIMEOUT,
        onTimeout: () => unreachable(`no answer within ${Duration.format(REQUEST_TIMEOUT)}`)
      })
    )

  /** `created`: whether the resource was made by this call (201) rather than found (200). */
  const created = <A>([body, response]: readonly [A, HttpClientResponse.HttpClientResponse]) => ({
    created: response.status === 201,
    body
  })

  return {
    baseUrl,
    listProfiles: Effect.fn("AdminClient.listProfiles")(function*() {
      return yield* call((api) => api.profiles.listProfiles())
    }),
    getProfile: Effect.fn("AdminClient.getProfile")(function*(profile: ProfileId) {
      return yield* call((api) => api.profiles.getProfile({ path: { profile } }))
    }),
    putProfile: Effect.fn("AdminClient.putProfile")(function*(
      profile: ProfileId,
      lifetimeDays?: number | null,
      upstreamOrigins?: ReadonlyArray<string> | null
    ) {
      const payload = {
        ...(lifetimeDays === undefined ? {} : { credential_max_lifetime_days: lifetimeDays }),
        ...(upstreamOrigins === undefined ? {} : { upstream_origins: upstreamOrigins })
      }
      const answer = created(
        yield* call((api) => api.profiles.putProfile({ path: { profile }, payload, withResponse: true }))
      )
      return { created: answer.created, profile: answer.body }
    }),
    deleteProfile: Effect.fn("AdminClient.deleteProfile")(function*(profile: ProfileId) {
      yield* call((api) => api.profiles.deleteProfile({ path: { profile } }))
    }),
    putEnvironment: Effect.fn("AdminClient.putEnvironment")(function*(path: EnvironmentAddress) {
      const answer = created(
        yield* call((api) => api.profiles.putEnvironment({ path, payload: {}, withResponse: true }))
      )
      return { created: answer.created, environment: answer.body }
    }),
    deleteEnvironment: Effect.fn("AdminClient.deleteEnvironment")(function*(path: EnvironmentAddress) {
      yield* call((api) => api.profiles.deleteEnvironment({ path }))
    }),
    createService: Effect.fn("AdminClient.createService")(
      function*(path: EnvironmentAddress, input: typeof ServiceInput.Encoded) {
        const payload = yield* checkedRequest(ServiceInput, input)
        return yield* call((api) => api.services.createService({ path, payload }))
      }
    ),
    deleteService: Effect.fn("AdminClient.deleteService")(function*(path: ServiceAddress) {
      yield* call((api) => api.services.deleteService({ path }))
    }),
    listCredentials: Effect.fn("AdminClient.listCredentials")(function*(path: ServiceAddress) {
      return yield* call((api) => api.services.listCredentials({ path }))
    }),
    addCredential: Effect.fn("AdminClient.addCredential")(function*(path: ServiceAddress, expiresAt?: string) {
      const payload = expiresAt === undefined ? {} : { expires_at: expiryDate(expiresAt) }
      return yield* call((api) => api.services.createCredential({ path, payload }))
    }),
    addKeyCredential: Effect.fn("AdminClient.addKeyCredential")(function*(path: ServiceAddress, publicKey: unknown, expiresAt?: string) {
      const payload = {
        public_key: publicKey as Record<string, unknown> | string,
        ...(expiresAt === undefined ? {} : { expires_at: expiryDate(expiresAt) })
      }
      return yield* call((api) => api.services.createKeyCredential({ path, payload }))
    }),
    removeCredential: Effect.fn("AdminClient.removeCredential")(function*(address: ServiceAddress, clientId: ClientId) {
      yield* call((api) => api.services.deleteCredential({ path: { ...address, client_id: clientId } }))
    }),
    setIntrospectProfiles: Effect.fn("AdminClient.setIntrospectProfiles")(function*(address, clientId, profiles) {
      return yield* call((api) =>
        api.credentialIntrospection.putIntrospectProfiles({
          path: { ...address, client_id: clientId },
          payload: { introspect_profiles: profiles }
        })
      )
    }),
    listAuditEvents: Effect.fn("AdminClient.listAuditEvents")(function*(query) {
      // As they go on the wire: the cursor as printed, the limit as text.
      const urlParams = yield* checkedRequest(AuditQueryParams, {
        ...Option.match(query.profile, { onNone: () => ({}), onSome: (profile) => ({ profile }) }),
        ...Option.match(query.limit, { onNone: () => ({}), onSome: (limit) => ({ limit: String(limit) }) }),
        ...Option.match(query.after, { onNone: () => ({}), onSome: (after) => ({ after }) })
      })
      return yield* call((api) => api.audit.listAuditEvents({ urlParams }))
    }),
    getSession: Effect.fn("AdminClient.getSession")(function*() {
      return yield* call((api) => api.session.getAdminSession())
    }),
    createAdminToken: Effect.fn("AdminClient.createAdminToken")(function*(input: typeof NewAdminTokenRequest.Encoded) {
      const payload = yield* checkedRequest(NewAdminTokenRequest, input)
      return yield* call((api) => api.adminTokens.createAdminToken({ payload }))
    }),
    listAdminTokens: Effect.fn("AdminClient.listAdminTokens")(function*() {
      return yield* call((api) => api.adminTokens.listAdminTokens())
    }),
    revokeAdminToken: Effect.fn("AdminClient.revokeAdminToken")(function*(name: string) {
      yield* call((api) => api.adminTokens.revokeAdminToken({ path: { name } }))
    }),
    addFederatedCredential: Effect.fn("AdminClient.addFederatedCredential")(function*(path, input) {
      const payload = yield* checkedRequest(FederatedCredentialInput, input)
      return yield* call((api) => api.services.createFederatedCredential({ path, payload }))
    }),
    listTrustedIssuers: Effect.fn("AdminClient.listTrustedIssuers")(function*() {
      return (yield* call((api) => api.trustedIssuers.listTrustedIssuers())).issuers
    }),
    getTrustedIssuer: Effect.fn("AdminClient.getTrustedIssuer")(function*(name: string) {
      const path = { name: yield* checkedRequest(TrustedIssuerName, name) }
      return yield* call((api) => api.trustedIssuers.getTrustedIssuer({ path }))
    }),
    createTrustedIssuer: Effect.fn("AdminClient.createTrustedIssuer")(function*(name, input) {
      const payload = { name: yield* checkedRequest(TrustedIssuerName, name), ...yield* checkedRequest(TrustedIssuerInput, input) }
      return yield* call((api) => api.trustedIssuers.createTrustedIssuer({ payload }))
    }),
    putTrustedIssuer: Effect.fn("AdminClient.putTrustedIssuer")(function*(name, input) {
      const path = { name: yield* checkedRequest(TrustedIssuerName, name) }
      const payload = yield* checkedRequest(TrustedIssuerInput, input)
      const answer = created(yield* call((api) => api.trustedIssuers.putTrustedIssuer({ path, payload, withResponse: true })))
      return { created: answer.created, issuer: answer.body }
    }),
    deleteTrustedIssuer: Effect.fn("AdminClient.deleteTrustedIssuer")(function*(name: string) {
      const path = { name: yield* checkedRequest(TrustedIssuerName, name) }
      yield* call((api) => api.trustedIssuers.deleteTrustedIssuer({ path }))
    })
  }
}

const parseJson = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
