/**
 * Parsing of the `Authorization` header (RFC 7235 §2.1, RFC 9110 §11): `scheme SP token68`, with a
 * case-insensitive scheme. We parse it ourselves: `@effect/platform`'s bearer security slices off
 * seven characters without checking the scheme, and turns a missing header into an empty token.
 */
import { Either, Redacted } from "effect"

const CREDENTIALS = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+) +([A-Za-z0-9._~+/-]+=*)$/

export interface Credentials {
  readonly scheme: string
  readonly value: string
}

/** The scheme (lower-cased) and its token68, or undefined when the header is not of that form. */
export const parseAuthorization = (header: string): Credentials | undefined => {
  const match = CREDENTIALS.exec(header.trim())
  return match === null ? undefined : { scheme: match[1]!.toLowerCase(), value: match[2]! }
}

/** `application/x-www-form-urlencoded` decoding of one Basic credential part (RFC 6749 §2.3.1). */
const formDecode = (part: string): string => decodeURIComponent(part.replace(/\+/g, " "))

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

export interface BasicCredentials {
  readonly clientId: string
  readonly clientSecret: Redacted.Redacted<string>
}

/**
 * Decodes `base64(urlencode(client_id) ":" urlencode(client_secret))`. Left when the credentials
 * cannot be decoded; the client id is then unknown.
 */
export const decodeBasicCredentials = (token68: string): Either.Either<BasicCredentials, "malformed"> => {
  if (!BASE64.test(token68) || token68.length % 4 !== 0) return Either.left("malformed")
  const decoded = Buffer.from(token68, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  if (colon < 0) return Either.left("malformed")
  try {
    return Either.right({
      clientId: formDecode(decoded.slice(0, colon)),
      clientSecret: Redacted.make(formDecode(decoded.slice(colon + 1)))
    })
  } catch {
    return Either.left("malformed")
  }
}

/**
 * The `Authorization` header as sent: one value, or every value when the request carries several
 * (Node keeps only the first in `headers`; `rawHeaders` has them all). Several are never one
 * credential: each endpoint that reads the header answers them `400 invalid_request`
 * (`MULTIPLE_AUTHORIZATION`) rather than picking one.
 */
export type AuthorizationHeader = string | ReadonlyArray<string> | undefined

export const MULTIPLE_AUTHORIZATION = "Multiple Authorization headers"

/** Whether the request sent more than one `Authorization` header. */
export const isMultiple = (header: AuthorizationHeader): header is ReadonlyArray<string> =>
  header !== undefined && typeof header !== "string"

/**
 * The `Authorization` header of a request as Node parsed it: `headers.authorization` holds the first,
 * `rawHeaders` (name, value, name, value...) every one. Only scanned when there is one at all.
 */
export const authorizationHeader = (request: {
  readonly headers: { readonly authorization?: string | undefined }
  readonly rawHeaders?: ReadonlyArray<string> | undefined
}): AuthorizationHeader => {
  const first = request.headers.authorization
  const raw = request.rawHeaders
  if (first === undefined || raw === undefined) return first
  let values: Array<string> | undefined
  let seen = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length !== 13 || name.toLowerCase() !== "authorization") continue
    seen++
    ;(values ??= []).push(raw[i + 1] ?? "")
  }
  return seen > 1 ? values! : first
}
