/**
 * `POST /oauth/token`: parses the form and the client authentication in the contract's order and
 * answers every outcome, success or failure, with `Cache-Control: no-store` and `Pragma: no-cache`
 * (RFC 6749 §5.1). Failures are written from the same wire schemas the OpenAPI document shows.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Redacted } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Api } from "../api/Api.js"
import { INVALID_REQUEST_DESCRIPTION } from "../api/WireErrors.js"
import { ClientCredentialsGrant } from "../auth/ClientCredentialsGrant.js"
import { TOKEN_LIFETIME_SECONDS } from "../auth/TokenService.js"
import { InvalidRequest, type PayloadTooLarge, UnsupportedGrantType } from "../domain/Errors.js"
import { decodeBasicCredentials, parseAuthorization } from "./AuthorizationHeader.js"
import { errorResponse } from "./ErrorResponses.js"
import { mediaType, readBodyText } from "./RequestBody.js"

const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" } as const

const FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const
type Field = typeof FIELDS[number]

const missing = new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION })

/** The six fields of the form: an empty value counts as missing (RFC 6749 §3.1), a repeated one is refused. */
const readFields = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<Partial<Record<Field, string>>, InvalidRequest | PayloadTooLarge> =>
  Effect.gen(function*() {
    // Only a form body carries fields; JSON or anything else yields none (CONTRACT §1).
    if (mediaType(request) !== "application/x-www-form-urlencoded") return {}
    const params = new URLSearchParams(yield* readBodyText(request, maxBytes))
    const fields: Partial<Record<Field, string>> = {}
    for (const name of FIELDS) {
      const values = params.getAll(name)
      if (values.length > 1) {
        return yield* new InvalidRequest({ description: `Parameter ${name} is included more than once` })
      }
      if (values[0] !== undefined && values[0] !== "") fields[name] = values[0]
    }
    return fields
  })

export const issueToken = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const grants = yield* ClientCredentialsGrant
    const fields = yield* readFields(request, config.maxBodyBytes)

    // Rows 1 and 2: the grant type.
    if (fields.grant_type === undefined) return yield* missing
    if (fields.grant_type !== "client_credentials") return yield* new UnsupportedGrantType()

    // Client authentication: client_secret_basic or client_secret_post, never both.
    const authorization = request.headers["authorization"]
    const credentials = authorization === undefined ? undefined : parseAuthorization(authorization)
    const basic = credentials?.scheme === "basic"
      ? decodeBasicCredentials(credentials.value)
      : authorization !== undefined && /^\s*basic(\s|$)/i.test(authorization)
      ? Either.left("malformed" as const)
      : undefined
    if (basic !== undefined && fields.client_secret !== undefined) {
      return yield* new InvalidRequest({ description: "Use exactly one client authentication method" })
    }
    if (basic !== undefined && Either.isRight(basic) && fields.client_id !== undefined && fields.client_id !== basic.right.clientId) {
      return yield* new InvalidRequest({ description: "client_id does not match the HTTP Basic credentials" })
    }
    const clientId = basic === undefined ? fields.client_id : Either.match(basic, { onLeft: () => "", onRight: (b) => b.clientId })
    const clientSecret = basic === undefined
      ? Option.map(Option.fromNullable(fields.client_secret), Redacted.make)
      : Either.match(basic, { onLeft: () => Option.none(), onRight: (b) => Option.some(b.clientSecret) })

    // Row 3: every other field present (a Basic header that cannot be decoded is present but fails at row 5).
    const basicMalformed = basic !== undefined && Either.isLeft(basic)
    if (
      (!basicMalformed && (clientId === undefined || clientId === "" || Option.isNone(clientSecret) || Redacted.value(clientSecret.value) === "")) ||
      fields.profile === undefined || fields.environment === undefined || fields.service_uuid === undefined
    ) {
      return yield* missing
    }

    // Rows 4 and 5.
    const issued = yield* grants.grant({
      clientId: clientId ?? "",
      clientSecret,
      profile: fields.profile,
      environment: fields.environment,
      serviceUuid: fields.service_uuid,
      basic: basic !== undefined,
      remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown")
    })
    return HttpServerResponse.unsafeJson(
      { access_token: issued.accessToken, token_type: "Bearer", expires_in: TOKEN_LIFETIME_SECONDS, scope: issued.claims.scope },
      { status: 200, headers: NO_STORE }
    )
  }).pipe(
    Effect.catchAll((failure) =>
      Effect.succeed(
        errorResponse(
          failure,
          failure._tag === "InvalidClient" && failure.basic ? { ...NO_STORE, "www-authenticate": `Basic realm="oauth"` } : NO_STORE
        )
      )
    )
  )

export const TokenHttpLive = HttpApiBuilder.group(Api, "token", (handlers) =>
  handlers.handleRaw("issueToken", ({ request }) => issueToken(request)))
