/**
 * What a token request says (RFC 6749 §4.4.2, §2.3.1): the six form fields and the client's
 * credentials, parsed in the contract's order; and the 200 answer's body (§5.1).
 */
import { Either, Option, Redacted } from "effect"
import { TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import { InvalidRequest } from "../domain/Errors.js"
import {
  type AuthorizationHeader,
  decodeBasicCredentials,
  isMultiple,
  MULTIPLE_AUTHORIZATION,
  parseAuthorization
} from "../domain/AuthorizationHeader.js"
import { assertedClientId, JWT_BEARER_ASSERTION } from "./ClientAssertion.js"
import type { IssuedToken } from "./TokenService.js"

/** Every answer of the token endpoint, success or failure, carries these (RFC 6749 §5.1). */
export const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" } as const

const FIELDS = [
  "grant_type",
  "client_id",
  "client_secret",
  "profile",
  "environment",
  "service_uuid",
  "client_assertion_type",
  "client_assertion"
] as const
type Field = typeof FIELDS[number]
export type TokenFields = Partial<Record<Field, string>> & {
  /** Every non-empty `resource` sent (RFC 8707); absent when none was. */
  readonly resource?: ReadonlyArray<string>
}

/**
 * The named fields of a form body: an empty value counts as missing (RFC 6749 §3.1), a repeated one
 * is refused. Also the revocation and introspection endpoints' reading of their forms.
 */
export const formFieldsOf =
  <Name extends string>(names: ReadonlyArray<Name>) =>
  (params: URLSearchParams): Either.Either<Partial<Record<Name, string>>, InvalidRequest> => {
    const fields: Partial<Record<Name, string>> = {}
    for (const name of names) {
      const values = params.getAll(name)
      if (values.length > 1) return Either.left(new InvalidRequest({ description: `Parameter ${name} is included more than once` }))
      if (values[0] !== undefined && values[0] !== "") fields[name] = values[0]
    }
    return Either.right(fields)
  }

const tokenFields = formFieldsOf(FIELDS)

/**
 * The six fields of a token request's form body, and its `resource`s (RFC 8707), which may be
 * repeated in the form: more than one is the decision's `invalid_target`, not a parse error.
 */
export const formFields = (text: string): Either.Either<TokenFields, InvalidRequest> => {
  const params = new URLSearchParams(text)
  const fields = tokenFields(params)
  if (Either.isLeft(fields) || !params.has("resource")) return fields
  const resource = params.getAll("resource").filter((value) => value !== "")
  return resource.length === 0 ? fields : Either.right({ ...fields.right, resource })
}

/** The 200 answer's body (RFC 6749 §5.1). */
export const tokenAnswer = (issued: IssuedToken) => ({
  access_token: issued.accessToken,
  // A token bound to a DPoP key (RFC 9449 §5) is a DPoP token.
  token_type: issued.claims.cnf === undefined ? "Bearer" : "DPoP",
  expires_in: TOKEN_LIFETIME_SECONDS,
  scope: issued.claims.scope
})

/**
 * The client's credentials, from `client_secret_basic` or `client_secret_post` (never both).
 * Undefined when they are missing (row 3). A Basic header that cannot be decoded counts as
 * present: its authentication fails at row 5, with the Basic challenge.
 */
export interface ClientCredentials {
  readonly clientId: string
  readonly clientSecret: Option.Option<Redacted.Redacted<string>>
  readonly basic: boolean
  /** A client assertion (`private_key_jwt`, `ClientAssertion`), when the client sent one instead of a secret. */
  readonly assertion?: ClientAssertionFields
}

export interface ClientAssertionFields {
  readonly assertion: Redacted.Redacted<string>
  /** Whether `client_assertion_type` is the JWT bearer type; any other type fails authentication. */
  readonly jwtBearer: boolean
}

export const TWO_METHODS = "Use exactly one client authentication method"

/**
 * `private_key_jwt` (RFC 7523 §2.2): `client_assertion_type` and `client_assertion` in place of a
 * secret; `client_id` optional (when sent, the assertion must be its own). Sent with a secret or
 * Basic: two methods, refused.
 */
const assertionCredentials = (
  isBasic: boolean,
  fields: TokenFields
): Either.Either<ClientCredentials | undefined, InvalidRequest> => {
  if (isBasic || fields.client_secret !== undefined) return Either.left(new InvalidRequest({ description: TWO_METHODS }))
  const { client_assertion, client_assertion_type } = fields
  if (client_assertion === undefined || client_assertion_type === undefined) return Either.right(undefined)
  return Either.right({
    // Which credential's key verifies it; unknown when the assertion is not a JWT (row 5 then fails).
    clientId: fields.client_id ?? assertedClientId(client_assertion) ?? "",
    clientSecret: Option.none(),
    basic: false,
    assertion: { assertion: Redacted.make(client_assertion), jwtBearer: client_assertion_type === JWT_BEARER_ASSERTION }
  })
}

export const clientCredentials = (
  authorization: AuthorizationHeader,
  fields: Pick<TokenFields, "client_id" | "client_secret" | "client_assertion" | "client_assertion_type">
): Either.Either<ClientCredentials | undefined, InvalidRequest> => {
  // Several headers are never one client's credentials, whichever method the form uses.
  if (isMultiple(authorization)) return Either.left(new InvalidRequest({ description: MULTIPLE_AUTHORIZATION }))
  const credentials = authorization === undefined ? undefined : parseAuthorization(authorization)
  const isBasic = credentials?.scheme === "basic" || /^\s*basic(\s|$)/i.test(authorization ?? "")
  if (fields.client_assertion !== undefined || fields.client_assertion_type !== undefined) {
    return assertionCredentials(isBasic, fields)
  }
  if (!isBasic) {
    return Either.right(
      fields.client_id === undefined || fields.client_secret === undefined
        ? undefined
        : { clientId: fields.client_id, clientSecret: Option.some(Redacted.make(fields.client_secret)), basic: false }
    )
  }
  if (fields.client_secret !== undefined) {
    return Either.left(new InvalidRequest({ description: TWO_METHODS }))
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
