/**
 * A small typed client over the admin API (docs/contract.md §3) for the command line: the server's
 * base URL and the admin token, each answer decoded with the same schemas the server encodes with.
 * Every way a call can go wrong is a typed failure whose `message` is what the operator reads:
 * the server's `error_description` for an answer outside 2xx, a plain sentence for a server that
 * cannot be reached, is not service-auth, or does not answer in time.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Config, Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { ADMIN_TOKEN_FILE } from "../admin-auth/AdminTokenFile.js"
import { CredentialList, ProfileList } from "../api/AdminApi.js"
import { AuditEventPage } from "../domain/AuditEvents.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import {
  EnvironmentDocument,
  NewCredential,
  ProfileDocument,
  ServiceDocument,
  type ServiceInput
} from "../domain/Models.js"

/** Where the server is when neither `--url` nor `SERVICE_AUTH_URL` says. */
export const DEFAULT_SERVER_URL = "http://localhost:3000"

/** How long one request may take; the server itself answers 503 within 1.5 s when its database is away. */
const REQUEST_TIMEOUT = Duration.seconds(30)

/** The server answered outside 2xx with the contract's error body. */
export class AdminApiError extends Schema.TaggedError<AdminApiError>()("AdminApiError", {
  status: Schema.Number,
  error: Schema.String,
  message: Schema.String
}) {}

/** No answer: connection refused, unknown host, TLS, timeout. */
export class ServerUnreachable extends Schema.TaggedError<ServerUnreachable>()("ServerUnreachable", {
  message: Schema.String
}) {}

/** An answer that is not the admin API's (a proxy's error page, another server at that URL). */
export class UnexpectedAnswer extends Schema.TaggedError<UnexpectedAnswer>()("UnexpectedAnswer", {
  status: Schema.Number,
  message: Schema.String
}) {}

/** `ADMIN_TOKEN` is unset or empty. */
export class AdminTokenMissing extends Schema.TaggedError<AdminTokenMissing>()("AdminTokenMissing", {
  message: Schema.String
}) {}

/** `--url` / `SERVICE_AUTH_URL` is not an http(s) base URL. */
export class InvalidServerUrl extends Schema.TaggedError<InvalidServerUrl>()("InvalidServerUrl", {
  message: Schema.String
}) {}

export type AdminCallError = AdminApiError | ServerUnreachable | UnexpectedAnswer
export type AdminSetupError = AdminTokenMissing | InvalidServerUrl

/** Transport and 5xx failures, which a later attempt may not meet (rotate keeps polling through them). */
export const isTransient = (error: AdminCallError): boolean =>
  error._tag === "ServerUnreachable" || error.status >= 500

const WireError = Schema.Struct({ error: Schema.String, error_description: Schema.String })

/** What a call names: a profile, an environment in it, a service in that. */
export interface EnvironmentAddress {
  readonly profile: ProfileId
  readonly environment: EnvironmentName
}
export interface ServiceAddress extends EnvironmentAddress {
  readonly uuid: ServiceUuid
}

export interface AdminClientShape {
  /** The base URL the client talks to, for messages. */
  readonly baseUrl: string
  readonly listProfiles: () => Effect.Effect<typeof ProfileList.Type, AdminCallError>
  readonly getProfile: (profile: ProfileId) => Effect.Effect<ProfileDocument, AdminCallError>
  /** `created` is false when the profile already existed (200 rather than 201). */
  readonly putProfile: (
    profile: ProfileId
  ) => Effect.Effect<{ readonly created: boolean; readonly profile: ProfileDocument }, AdminCallError>
  readonly deleteProfile: (profile: ProfileId) => Effect.Effect<void, AdminCallError>
  readonly putEnvironment: (
    address: EnvironmentAddress
  ) => Effect.Effect<{ readonly created: boolean; readonly environment: EnvironmentDocument }, AdminCallError>
  readonly deleteEnvironment: (address: EnvironmentAddress) => Effect.Effect<void, AdminCallError>
  readonly createService: (
    address: EnvironmentAddress,
    input: typeof ServiceInput.Encoded
  ) => Effect.Effect<ServiceDocument, AdminCallError>
  readonly deleteService: (address: ServiceAddress) => Effect.Effect<void, AdminCallError>
  readonly listCredentials: (address: ServiceAddress) => Effect.Effect<typeof CredentialList.Type, AdminCallError>
  readonly addCredential: (address: ServiceAddress) => Effect.Effect<NewCredential, AdminCallError>
  readonly removeCredential: (address: ServiceAddress, clientId: ClientId) => Effect.Effect<void, AdminCallError>
  readonly listAuditEvents: (query: {
    readonly profile: Option.Option<ProfileId>
    readonly limit: Option.Option<number>
    readonly after: Option.Option<string>
  }) => Effect.Effect<AuditEventPage, AdminCallError>
}

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
        const http = yield* HttpClient.HttpClient
        return makeAdminClient(base, token, http)
      })
    ).pipe(Layer.provide(FetchHttpClient.layer))
}

/** Whether `base` names this machine: only then may the local data directory's token be sent to it. */
const isLoopback = (base: string) => {
  const host = new URL(base).hostname
  return host === "localhost" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host)
}

/** The token the CLI sends and where it came from, so that a refusal can name its source. */
interface AdminTokenInUse {
  readonly token: Redacted.Redacted
  readonly source: string
}

/**
 * `ADMIN_TOKEN`; or, for a server on this machine, the token an embedded server generated into
 * `DATA_DIR/admin-token` (./data by default), which only this user can read. Never sent elsewhere:
 * that token is the local server's.
 */
const adminTokenFor = (base: string): Effect.Effect<AdminTokenInUse, AdminTokenMissing> =>
  Effect.gen(function*() {
    const configured = yield* Config.option(Config.redacted("ADMIN_TOKEN")).pipe(
      Effect.orElseSucceed(() => Option.none<Redacted.Redacted>())
    )
    if (Option.isSome(configured) && Redacted.value(configured.value) !== "") {
      return { token: configured.value, source: "ADMIN_TOKEN" }
    }
    const dataDir = yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data"), Effect.orElseSucceed(() => "./data"))
    const stored = isLoopback(base)
      ? yield* Effect.sync(() => {
        try {
          return readFileSync(join(dataDir, ADMIN_TOKEN_FILE), "utf8").trim()
        } catch {
          return ""
        }
      })
      : ""
    if (stored !== "") {
      return {
        token: Redacted.make(stored),
        source: `${join(dataDir, ADMIN_TOKEN_FILE)} (ADMIN_TOKEN is not set, so the embedded server's file was read; set ADMIN_TOKEN, or DATA_DIR for another data directory)`
      }
    }
    return yield* new AdminTokenMissing({
      message: "ADMIN_TOKEN is not set: export the server's admin token in ADMIN_TOKEN (it is never taken as an " +
        "argument; for an embedded server on this machine, DATA_DIR/admin-token is read when it exists)"
    })
  })

/** The base URL without a trailing slash; a path prefix is kept (a server behind a reverse proxy). */
export const parseServerUrl = (raw: string): Effect.Effect<string, InvalidServerUrl> => {
  const invalid = (why: string) =>
    new InvalidServerUrl({ message: `invalid server URL ${JSON.stringify(raw)} (--url or SERVICE_AUTH_URL): ${why}` })
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Effect.fail(invalid("not an absolute URL, e.g. http://localhost:3000"))
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return Effect.fail(invalid("only http and https are spoken"))
  // The token goes in a header; credentials in the URL would be a second, leakier secret.
  if (url.username !== "" || url.password !== "") return Effect.fail(invalid("it must not carry a user name or password"))
  if (url.search !== "" || url.hash !== "") return Effect.fail(invalid("it must not carry a query or a fragment"))
  return Effect.succeed(`${url.origin}${url.pathname.replace(/\/+$/, "")}`)
}

/** The node error code (ECONNREFUSED, ...) and the innermost message down a fetch failure's causes. */
const innermost = (cause: unknown): { readonly code: string | undefined; readonly message: string } => {
  let code: string | undefined
  let message = cause instanceof Error ? cause.message : String(cause)
  for (let current = cause, depth = 0; current instanceof Error && depth < 5; depth++) {
    const own = (current as { code?: unknown }).code
    if (code === undefined && typeof own === "string") code = own
    message = current.message
    current = current.cause
  }
  return { code, message }
}

const transportReason = (cause: unknown): string => {
  const { code, message } = innermost(cause)
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused"
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host not found"
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return "the connection was closed before an answer"
    case "ETIMEDOUT":
    case "UND_ERR_CONNECT_TIMEOUT":
      return "the connection timed out"
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "host unreachable"
    case undefined:
      return message
    default:
      return code.includes("CERT") || code.includes("SELF_SIGNED")
        ? `its TLS certificate is not trusted (${code})`
        : code
  }
}

const segment = (value: string) => encodeURIComponent(value)
const profilePath = (profile: ProfileId) => `/admin/profiles/${segment(profile)}`
const environmentPath = (a: EnvironmentAddress) => `${profilePath(a.profile)}/environments/${segment(a.environment)}`
const servicePath = (a: ServiceAddress) => `${environmentPath(a)}/services/${segment(a.uuid)}`

const makeAdminClient = (
  baseUrl: string,
  { source, token }: AdminTokenInUse,
  http: HttpClient.HttpClient
): AdminClientShape => {
  const unreachable = (reason: string) =>
    new ServerUnreachable({
      message: `cannot reach the service-auth server at ${baseUrl}: ${reason} (is it running? is --url or SERVICE_AUTH_URL right?)`
    })

  const notOurs = (request: HttpClientRequest.HttpClientRequest, status: number, what: string) =>
    new UnexpectedAnswer({
      status,
      message: `${request.method} ${baseUrl}${request.url} answered ${status}${what}: is ${baseUrl} a service-auth server?`
    })

  /** One call: status and JSON body when 2xx; the server's error otherwise. */
  const send = (request: HttpClientRequest.HttpClientRequest) =>
    Effect.gen(function*() {
      const response = yield* http.execute(
        request.pipe(HttpClientRequest.prependUrl(baseUrl), HttpClientRequest.bearerToken(Redacted.value(token)))
      ).pipe(
        // A redirect would carry the token elsewhere; the admin API never redirects.
        Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }),
        Effect.mapError((error) => unreachable(transportReason(error.cause)))
      )
      const text = yield* response.text.pipe(
        Effect.catchTag("ResponseError", () => Effect.fail(unreachable("the connection closed in the middle of the answer")))
      )
      const body = parseJson(text)
      if (response.status >= 200 && response.status < 300) return { status: response.status, body }
      const wire = Schema.decodeUnknownOption(WireError)(body)
      if (Option.isSome(wire)) {
        return yield* new AdminApiError({
          status: response.status,
          error: wire.value.error,
          // A refused token: say which one was sent, since the CLI may have picked it up by itself.
          message: response.status === 401
            ? `${wire.value.error_description}: the CLI sent the admin token from ${source}; ` +
              `is it the one of the server at ${baseUrl}?`
            : wire.value.error_description
        })
      }
      const location = response.headers["location"]
      return yield* notOurs(request, response.status, location === undefined ? "" : ` (a redirect to ${location})`)
    }).pipe(
      Effect.timeoutFail({
        duration: REQUEST_TIMEOUT,
        onTimeout: () => unreachable(`no answer within ${Duration.format(REQUEST_TIMEOUT)}`)
      })
    )

  /** A 2xx answer's body, decoded; a body of another shape means --url names something else. */
  const decoded = <A, I>(schema: Schema.Schema<A, I>, request: HttpClientRequest.HttpClientRequest) =>
    send(request).pipe(
      Effect.flatMap((answer) =>
        Schema.decodeUnknown(schema)(answer.body).pipe(
          Effect.map((body) => ({ status: answer.status, body })),
          Effect.mapError(() => notOurs(request, answer.status, " with a body of an unexpected shape"))
        )
      )
    )

  const body = <A>(answer: { readonly body: A }) => answer.body

  return {
    baseUrl,
    listProfiles: Effect.fn("AdminClient.listProfiles")(function*() {
      return body(yield* decoded(ProfileList, HttpClientRequest.get("/admin/profiles")))
    }),
    getProfile: Effect.fn("AdminClient.getProfile")(function*(profile: ProfileId) {
      return body(yield* decoded(ProfileDocument, HttpClientRequest.get(profilePath(profile))))
    }),
    putProfile: Effect.fn("AdminClient.putProfile")(function*(profile: ProfileId) {
      const answer = yield* decoded(ProfileDocument, HttpClientRequest.put(profilePath(profile)))
      return { created: answer.status === 201, profile: answer.body }
    }),
    deleteProfile: Effect.fn("AdminClient.deleteProfile")(function*(profile: ProfileId) {
      yield* send(HttpClientRequest.del(profilePath(profile)))
    }),
    putEnvironment: Effect.fn("AdminClient.putEnvironment")(function*(address: EnvironmentAddress) {
      const answer = yield* decoded(EnvironmentDocument, HttpClientRequest.put(environmentPath(address)))
      return { created: answer.status === 201, environment: answer.body }
    }),
    deleteEnvironment: Effect.fn("AdminClient.deleteEnvironment")(function*(address: EnvironmentAddress) {
      yield* send(HttpClientRequest.del(environmentPath(address)))
    }),
    createService: Effect.fn("AdminClient.createService")(
      function*(address: EnvironmentAddress, input: typeof ServiceInput.Encoded) {
        const request = HttpClientRequest.post(`${environmentPath(address)}/services`).pipe(
          HttpClientRequest.bodyUnsafeJson(input)
        )
        return body(yield* decoded(ServiceDocument, request))
      }
    ),
    deleteService: Effect.fn("AdminClient.deleteService")(function*(address: ServiceAddress) {
      yield* send(HttpClientRequest.del(servicePath(address)))
    }),
    listCredentials: Effect.fn("AdminClient.listCredentials")(function*(address: ServiceAddress) {
      return body(yield* decoded(CredentialList, HttpClientRequest.get(`${servicePath(address)}/credentials`)))
    }),
    addCredential: Effect.fn("AdminClient.addCredential")(function*(address: ServiceAddress) {
      return body(yield* decoded(NewCredential, HttpClientRequest.post(`${servicePath(address)}/credentials`)))
    }),
    removeCredential: Effect.fn("AdminClient.removeCredential")(function*(address: ServiceAddress, clientId: ClientId) {
      yield* send(HttpClientRequest.del(`${servicePath(address)}/credentials/${segment(clientId)}`))
    }),
    listAuditEvents: Effect.fn("AdminClient.listAuditEvents")(function*(query) {
      const request = HttpClientRequest.get("/admin/audit").pipe(
        HttpClientRequest.setUrlParams({
          ...Option.match(query.profile, { onNone: () => ({}), onSome: (profile) => ({ profile }) }),
          ...Option.match(query.limit, { onNone: () => ({}), onSome: (limit) => ({ limit: String(limit) }) }),
          ...Option.match(query.after, { onNone: () => ({}), onSome: (after) => ({ after }) })
        })
      )
      return body(yield* decoded(AuditEventPage, request))
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
