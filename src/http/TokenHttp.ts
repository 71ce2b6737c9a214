/**
 * `POST /oauth/token`: parses the form and the client authentication in the contract's order and
 * answers every outcome, success or failure, with `Cache-Control: no-store` and `Pragma: no-cache`
 * (RFC 6749 §5.1). Failures are written from the same wire schemas the OpenAPI document shows.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Redacted } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Api } from "../api/Api.js"
import { ClientCredentialsGrant } from "../auth/ClientCredentialsGrant.js"
import type { IssuedToken } from "../auth/TokenService.js"
import { TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import { INVALID_REQUEST_DESCRIPTION, InvalidRequest, type PayloadTooLarge, UnsupportedGrantType } from "../domain/Errors.js"
import { decodeBasicCredentials, parseAuthorization } from "./AuthorizationHeader.js"
import { errorResponse } from "./ErrorResponses.js"
import { mediaType, readBodyText } from "./RequestBody.js"

export const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" } as const

const FIELDS = ["grant_type", "client_id", "client_secret", "profile", "environment", "service_uuid"] as const
type Field = typeof FIELDS[number]
export type TokenFields = Partial<Record<Field, string>>

const missing = new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION })

/** The six fields of a form body: an empty value counts as missing (RFC 6749 §3.1), a repeated one is refused. */
export const formFields = (text: string): Either.Either<TokenFields, InvalidRequest> => {
  const params = new URLSearchParams(text)
  const fields: TokenFields = {}
  for (const name of FIELDS) {
    const values = params.getAll(name)
    if (values.length > 1) return Either.left(new InvalidRequest({ description: `Parameter ${name} is included more than once` }))
    if (values[0] !== undefined && values[0] !== "") fields[name] = values[0]
  }
  return Either.right(fields)
}

const readFields = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<TokenFields, InvalidRequest | PayloadTooLarge> =>
  // Only a form body carries fields; JSON or anything else yields none (docs/contract.md §1).
  mediaType(request) !== "application/x-www-form-urlencoded"
    ? Effect.succeed({})
    : Effect.flatMap(readBodyText(request, maxBytes), formFields)

/** The 200 answer's body (RFC 6749 §5.1). */
export const tokenAnswer = (issued: IssuedToken) => ({
  access_token: issued.accessToken,
  token_type: "Bearer",
  expires_in: TOKEN_LIFETIME_SECONDS,
  scope: issued.claims.scope
})

/**
 * The client's credentials, from `client_secret_basic` or `client_secret_post` (never both).
 * Undefined when they are missing (row 3). A Basic header that cannot be decoded counts as
 * present: its authentication fails at row 5, with the Basic challenge.
 */
type ClientCredentials = {
  readonly clientId: string
  readonly clientSecret: Option.Option<Redacted.Redacted<string>>
  readonly basic: boolean
}

export const clientCredentials = (
  authorization: string | undefined,
  fields: TokenFields
): Either.Either<ClientCredentials | undefined, InvalidRequest> => {
  const credentials = authorization === undefined ? undefined : parseAuthorization(authorization)
  const isBasic = credentials?.scheme === "basic" || /^\s*basic(\s|$)/i.test(authorization ?? "")
  if (!isBasic) {
    return Either.right(
      fields.client_id === undefined || fields.client_secret === undefined
        ? undefined
        : { clientId: fields.client_id, clientSecret: Option.some(Redacted.make(fields.client_secret)), basic: false }
    )
  }
  if (fields.client_secret !== undefined) {
    return Either.left(new InvalidRequest({ description: "Use exactly one client authentication method" }))
  }
  const decoded = credentials === undefined ? Either.left("malformed") : decodeBasicCredentials(credentials.value)
  if (Either.isLeft(decoded)) return Either.right({ clientId: "", clientSecret: Option.none(), basic: true })
  const { clientId, clientSecret } = decoded.right
  if (fields.client_id !== undefined && fields.client_id !== clientId) {
    return Either.left(new InvalidRequest({ description: "client_id does not match the HTTP Basic credentials" }))
  }
  // Empty parts count as missing, as empty form fields do (RFC 6749 §3.1).
  return Either.right(
    clientId === "" || Redacted.value(clientSecret) === ""
      ? undefined
      : { clientId, clientSecret: Option.some(clientSecret), basic: true }
  )
}

export const issueToken = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const grants = yield* ClientCredentialsGrant
    const fields = yield* readFields(request, config.maxBodyBytes)

    // Rows 1 and 2: the grant type.
    if (fields.grant_type === undefined) return yield* missing
    if (fields.grant_type !== "client_credentials") return yield* new UnsupportedGrantType()

    // Row 3: client credentials and the target present.
    const client = yield* clientCredentials(request.headers["authorization"], fields)
    if (
      client === undefined || fields.profile === undefined || fields.environment === undefined ||
      fields.service_uuid === undefined
    ) {
      return yield* missing
    }

    // Rows 4 and 5.
    const issued = yield* grants.grant({
      ...client,
      profile: fields.profile,
      environment: fields.environment,
      serviceUuid: fields.service_uuid,
      remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown")
    })
    return HttpServerResponse.unsafeJson(tokenAnswer(issued), { status: 200, headers: NO_STORE })
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

export const layer = HttpApiBuilder.group(Api, "token", (handlers) =>
  // Raw: a form body whose repeated, empty or non-form fields must all answer the OAuth error body.
  handlers.handleRaw("issueToken", ({ request }) => issueToken(request)))
