/**
 * A service's handler as the admin API takes it (`ServiceHandlerInput`), stores it (`StoredHandler`,
 * static header values sealed) and answers it (`ServiceHandlerConfig`, header names only): echo, or
 * a proxy to an upstream URL with its timeout and static headers.
 */
import { Schema } from "effect"
import { UPSTREAM_URL_MAX_LENGTH } from "./Limits.js"
import { StorableText } from "./Text.js"

const HttpUrl = StorableText.pipe(
  Schema.filter((value) => {
    try {
      const url = new URL(value)
      return (url.protocol === "http:" || url.protocol === "https:") && value.length <= UPSTREAM_URL_MAX_LENGTH
    } catch {
      return false
    }
  }, { message: () => `url must be an absolute http or https URL of at most ${UPSTREAM_URL_MAX_LENGTH} characters` })
)

export const EchoHandler = Schema.Struct({ type: Schema.Literal("echo") })

/** How long a proxy waits for its upstream, when not UPSTREAM_TIMEOUT_MS. */
const UpstreamTimeout = Schema.Int.pipe(Schema.between(100, 60_000, {
  message: () => "timeout_ms must be an integer from 100 to 60000"
})).annotations({
  description: "Milliseconds the upstream has to answer, 100-60000; UPSTREAM_TIMEOUT_MS (default 10000) when absent."
})

/**
 * A static header's name: an HTTP token (RFC 9110 §5.6.2) that is none of the headers the gateway
 * sets itself or that describe the connection (`RESERVED_HEADER_NAMES` below).
 */
export const UpstreamHeaderName = Schema.String.pipe(
  Schema.filter((name) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/.test(name), {
    message: () => "a header name must be an HTTP token of 1-64 characters (letters, digits, !#$%&'*+.^_`|~-)"
  }),
  Schema.filter((name) => !RESERVED_HEADER_NAMES.has(name.toLowerCase()), {
    message: () =>
      "a header name must not be one the gateway sets (Content-Type, Host, Content-Length, X-Client-Id, X-Service-*, " +
      "X-Request-Id, traceparent...) or a hop-by-hop header (Connection, Transfer-Encoding...)"
  })
).annotations({ identifier: "UpstreamHeaderName", description: "A header name (an HTTP token), not one the gateway sets." })

/** A header value: visible ASCII, spaces and tabs inside (RFC 9110 §5.5), 1-4096 characters. */
const UpstreamHeaderValue = Schema.String.pipe(
  Schema.filter((value) => /^[\x21-\x7e]([\x20-\x7e\t]{0,4094}[\x21-\x7e])?$/.test(value), {
    message: () => "a header value must be 1-4096 visible ASCII characters (spaces and tabs only inside)"
  })
)

/** The gateway's own headers, those of the connection, and what the body or the trace decides. */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  "content-type",
  "content-length",
  "content-encoding",
  "transfer-encoding",
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "upgrade",
  "te",
  "trailer",
  "expect",
  "accept",
  "proxy-authorization",
  "proxy-authenticate",
  "x-client-id",
  "x-service-profile",
  "x-service-environment",
  "x-service-uuid",
  "x-request-id",
  "x-service-auth-assertion",
  "traceparent",
  "tracestate",
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "cookie"
])

/** At most this many static headers per service. */
export const MAX_UPSTREAM_HEADERS = 10

const distinctNames = (names: ReadonlyArray<string>) => new Set(names.map((name) => name.toLowerCase())).size === names.length

/** Static headers as an operator sends them: names with their values (write-only). */
const UpstreamHeadersInput = Schema.Record({ key: UpstreamHeaderName, value: UpstreamHeaderValue }).pipe(
  Schema.filter((headers) => Object.keys(headers).length <= MAX_UPSTREAM_HEADERS, {
    message: () => `headers may hold at most ${MAX_UPSTREAM_HEADERS} names`
  }),
  Schema.filter((headers) => distinctNames(Object.keys(headers)), {
    message: () => "headers must not name the same header twice (names are case-insensitive)"
  })
).annotations({
  identifier: "UpstreamHeadersInput",
  description: "Header name → value, sent with every call to the upstream (an API key...). Replaces the stored set " +
    "({} removes them all). Values are write-only: never answered, shown or logged."
})

/** Static headers as answered: their names only. */
const UpstreamHeaderNames = Schema.Array(UpstreamHeaderName).pipe(
  Schema.maxItems(MAX_UPSTREAM_HEADERS),
  Schema.filter(distinctNames, { message: () => "headers must not name the same header twice (names are case-insensitive)" })
).annotations({
  identifier: "UpstreamHeaderNames",
  description: "The names of the static headers the upstream receives; their values are never answered."
})

export const ProxyHandler = Schema.Struct({
  type: Schema.Literal("proxy"),
  url: HttpUrl,
  timeout_ms: Schema.optional(UpstreamTimeout),
  headers: Schema.optional(UpstreamHeaderNames)
})
/** What the admin API answers: static header names only. */
export const ServiceHandlerConfig = Schema.Union(EchoHandler, ProxyHandler).annotations({
  identifier: "ServiceHandler",
  description: "What the service computes: `echo` answers the request back; `proxy` forwards it to `url` " +
    "(`timeout_ms`, and `headers`: the names of its static upstream headers)."
})
export type ServiceHandlerConfig = typeof ServiceHandlerConfig.Type

export const ProxyHandlerInput = Schema.Struct({
  type: Schema.Literal("proxy"),
  url: HttpUrl,
  timeout_ms: Schema.optional(UpstreamTimeout),
  headers: Schema.optional(
    Schema.Union(UpstreamHeadersInput, UpstreamHeaderNames).annotations({
      description: "An object (name → value) replaces the static headers; an array of names keeps those of the " +
        "stored ones (what GET answers, so a service read and written back keeps them); absent keeps them all."
    })
  )
})
/** What an operator sends: static headers with their values (or names to keep). */
export const ServiceHandlerInput = Schema.Union(EchoHandler, ProxyHandlerInput).annotations({
  identifier: "ServiceHandlerInput",
  description: "What the service computes: `echo` answers the request back; `proxy` forwards it to `url`, within " +
    "`timeout_ms`, with the static `headers`."
})
export type ServiceHandlerInput = typeof ServiceHandlerInput.Type

/**
 * A handler as stored: static header values sealed (`UpstreamHeaders.sealHeaderValue`). Never
 * answered as it is: `answeredHandler` keeps the names.
 */
export const StoredHandler = Schema.Union(
  EchoHandler,
  Schema.Struct({
    type: Schema.Literal("proxy"),
    url: HttpUrl,
    timeout_ms: Schema.optional(UpstreamTimeout),
    headers: Schema.optional(Schema.Record({ key: UpstreamHeaderName, value: Schema.String }))
  })
)
export type StoredHandler = typeof StoredHandler.Type

/** The handler as the admin API answers it: the static headers' names, never their (sealed) values. */
export const answeredHandler = (stored: StoredHandler): ServiceHandlerConfig => {
  if (stored.type !== "proxy") return stored
  const { headers, ...rest } = stored
  return headers === undefined ? rest : { ...rest, headers: Object.keys(headers).sort() }
}

export const defaultHandler: StoredHandler = { type: "echo" }
