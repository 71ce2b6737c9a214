/**
 * Hostile-input helpers: the invariant every error answer must satisfy, and FastCheck generators
 * of hostile values (sent with `rawRequest`, in `Http.ts`).
 */
import { expect } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { latin1, type RawRequest, type RawResponse } from "./Http.js"

/** Printable summary of a request for failure messages. */
export const describeRequest = (request: RawRequest): string => {
  const body = request.body === undefined
    ? ""
    : ` body(${typeof request.body === "string" ? Buffer.byteLength(request.body) : request.body.length}B)=${
      JSON.stringify(
        Buffer.from(typeof request.body === "string" ? Buffer.from(request.body) : request.body).subarray(0, 120).toString("latin1")
      )
    }`
  return `${request.method} ${JSON.stringify(request.path.slice(0, 300))} headers=${
    JSON.stringify(request.headers ?? {}).slice(0, 300)
  }${body}`
}

const STACK_FRAME = /\n\s+at\s|\bat\s+\S+\s+\([^)]*:\d+:\d+\)|\.ts:\d+:\d+|\.js:\d+:\d+|node:internal/
const SQL_FRAGMENTS = ["SELECT", "INSERT", "UPDATE ", "DELETE FROM", "relation", "syntax error", "pglite", "duplicate key", "violates"]

const requestText = (request: RawRequest): string =>
  `${request.path} ${JSON.stringify(request.headers ?? {})} ${
    request.body === undefined
      ? ""
      : Buffer.from(typeof request.body === "string" ? Buffer.from(request.body) : request.body).toString("latin1")
  }`

/** Neither a stack trace nor an SQL fragment that the request itself did not contain. */
export const expectNoLeak = (request: RawRequest, response: RawResponse) => {
  const context = `${describeRequest(request)}\n→ ${response.status} ${response.text.slice(0, 500)}`
  expect(STACK_FRAME.test(response.text), `stack frame in the answer to ${context}`).toBe(false)
  const sent = requestText(request)
  for (const fragment of SQL_FRAGMENTS) {
    if (!sent.includes(fragment)) {
      expect(response.text.includes(fragment), `SQL fragment ${fragment} in the answer to ${context}`).toBe(false)
    }
  }
}

/** A 4xx answer with exactly the contract's JSON error body. */
export const expectErrorAnswer = (request: RawRequest, response: RawResponse, statuses?: ReadonlyArray<number>) => {
  const context = `${describeRequest(request)}\n→ ${response.status} ${response.headers["content-type"]} ${response.text.slice(0, 500)}`
  expect(response.status >= 400 && response.status < 500, `not a 4xx: ${context}`).toBe(true)
  if (statuses !== undefined) expect(statuses, `unexpected status: ${context}`).toContain(response.status)
  expect(response.headers["content-type"] ?? "", `not JSON: ${context}`).toMatch(/^application\/json\b/)
  let body: unknown
  try {
    body = JSON.parse(response.text)
  } catch {
    expect.fail(`body does not parse as JSON: ${context}`)
  }
  expect(typeof body === "object" && body !== null && !Array.isArray(body), `body is not an object: ${context}`).toBe(true)
  const record = body as Record<string, unknown>
  expect(Object.keys(record).sort(), `body keys: ${context}`).toEqual(["error", "error_description"])
  expect(typeof record.error, `error is not a string: ${context}`).toBe("string")
  expect(typeof record.error_description, `error_description is not a string: ${context}`).toBe("string")
  expectNoLeak(request, response)
  return record as { error: string; error_description: string }
}

/**
 * The invariant for hostile input: a 4xx error answer; or, where `allowSuccess` says the input may
 * have been valid after all, a 2xx (never a 5xx, a 3xx, or a non-JSON error).
 */
export const expectSafeAnswer = (
  request: RawRequest,
  response: RawResponse,
  allowSuccess: (response: RawResponse) => boolean = () => false
) => {
  const context = `${describeRequest(request)}\n→ ${response.status} ${response.text.slice(0, 500)}`
  expect(response.status, `server error: ${context}`).toBeLessThan(500)
  if (response.status >= 200 && response.status < 300 && allowSuccess(response)) {
    expectNoLeak(request, response)
    return
  }
  expectErrorAnswer(request, response)
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Byte sequences that are not valid UTF-8. */
export const INVALID_UTF8: ReadonlyArray<Uint8Array> = [
  Uint8Array.of(0xff),
  Uint8Array.of(0xfe, 0xff),
  Uint8Array.of(0xc3, 0x28), // bad continuation
  Uint8Array.of(0xa0, 0xa1), // lone continuation bytes
  Uint8Array.of(0xe2, 0x28, 0xa1),
  Uint8Array.of(0xf0, 0x28, 0x8c, 0x28),
  Uint8Array.of(0xc0, 0xaf), // overlong '/'
  Uint8Array.of(0xe0, 0x80, 0xaf), // overlong '/'
  Uint8Array.of(0xed, 0xa0, 0x80), // UTF-16 surrogate
  Uint8Array.of(0xf4, 0x90, 0x80, 0x80), // beyond U+10FFFF
  Uint8Array.of(0xf8, 0x88, 0x80, 0x80, 0x80), // 5-byte form
  Uint8Array.of(0xe2, 0x82) // truncated
]

export const invalidUtf8 = fc.constantFrom(...INVALID_UTF8)

/** Bytes with invalid UTF-8 sequences spliced in. */
export const bytesWithInvalidUtf8 = fc
  .tuple(fc.string({ maxLength: 40 }), invalidUtf8, fc.string({ maxLength: 40 }))
  .map(([a, bad, b]) => Buffer.concat([Buffer.from(a), bad, Buffer.from(b)]))

export const CONTENT_TYPES = [
  "application/x-www-form-urlencoded",
  "application/x-www-form-urlencoded; charset=utf-8",
  "application/x-www-form-urlencoded; charset=iso-8859-1",
  "APPLICATION/X-WWW-FORM-URLENCODED",
  "application/json",
  "application/json; charset=utf-16",
  "application/json; charset=utf-32le",
  "application/json;;;;charset=\"utf-8\"",
  "multipart/form-data",
  "multipart/form-data; boundary=",
  "multipart/form-data; boundary=\"unterminated",
  "multipart/form-data; boundary=----x",
  "text/plain",
  "text/html; charset=utf-8",
  "application/octet-stream",
  "application/xml",
  "application/vnd.api+json",
  "*/*",
  "garbage",
  ";;;",
  "/",
  "application/",
  "a/b; c=d; e",
  latin1("application/jsön"),
  "x".repeat(4000)
] as const

/** A Content-Type header, or none. */
export const contentType = fc.option(
  fc.oneof(
    fc.constantFrom(...CONTENT_TYPES),
    // eslint-disable-next-line no-control-regex
    fc.string({ maxLength: 60 }).map((s) => s.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, "")).map(latin1)
  ),
  { nil: undefined }
)

/** Header values node:http will put on the wire: no CR/LF or other control characters. */
// eslint-disable-next-line no-control-regex
const headerSafe = (value: string) => latin1(value.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, ""))

/** Odd Authorization headers: unknown schemes, empty tokens, unicode, 10 KB Bearer tokens, bad base64. */
export const oddAuthorization = (valid: ReadonlyArray<string> = []) =>
  fc.option(
    fc.oneof(
      fc.constantFrom(
        "",
        " ",
        "Bearer",
        "Bearer ",
        "Bearer  ",
        "bearer x y",
        "Bearer ==",
        "Bearer a.b.c",
        "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
        "Bearer eyJ.eyJ.sig",
        "Basic",
        "Basic ",
        "Basic ====",
        "Basic Og==",
        "Basic OjE=",
        "Basic %%%",
        `Basic ${Buffer.from("svc_x:").toString("base64")}`,
        `Basic ${Buffer.from("%zz:%zz").toString("base64")}`,
        `Basic ${Buffer.from(latin1(Uint8Array.of(0xff, 0x3a, 0xfe))).toString("base64")}`,
        "Digest username=\"x\"",
        "Negotiate YII=",
        "Bearer\tabc",
        latin1("Bearer tökén"),
        latin1("Bearer 🔑🔑🔑"),
        latin1(Uint8Array.of(0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xff, 0xfe)),
        `Bearer ${"A".repeat(10_240)}`,
        `Bearer ${"eyJ".repeat(2_000)}.${"x".repeat(2_000)}.${"y".repeat(1_000)}`,
        `Basic ${"Q".repeat(10_240)}`,
        `${"X".repeat(8_000)} token`,
        ...valid
      ),
      fc.tuple(fc.constantFrom("Bearer", "Basic", "bearer", "BASIC", "Token", ""), fc.string({ maxLength: 200 }))
        .map(([scheme, value]) => headerSafe(`${scheme} ${value}`))
    ),
    { nil: undefined }
  )

/** Path segments that are not valid names: traversal, bad percent-encoding, NUL, long, unicode, SQL. */
export const HOSTILE_SEGMENTS = [
  "..",
  ".",
  "%2e%2e",
  "%2E%2E",
  ".%2e",
  "%2e",
  "%00",
  "a%00b",
  "%zz",
  "%",
  "%e",
  "%ff",
  "%c3%28",
  "%ed%a0%80",
  "%2f",
  "a%2fb",
  "%5c..%5c",
  "..%2f..%2fetc%2fpasswd",
  "%252e%252e",
  "%20",
  "a%20b",
  "+",
  "~",
  "-",
  "_",
  ".hidden",
  "not-a-uuid",
  "00000000-0000-0000-0000-00000000000g",
  "00000000000000000000000000000000",
  "{00000000-0000-0000-0000-000000000000}",
  "x".repeat(129),
  "a".repeat(1024),
  "a".repeat(1025),
  "b".repeat(2000),
  "%41".repeat(700),
  "%e2%82%ac",
  encodeURIComponent("日本語"),
  encodeURIComponent("🔥"),
  "'%20OR%20'1'='1",
  "1;DROP%20TABLE%20profiles",
  "%27%3B--",
  "$%7Bjndi%3Aldap%3A%2F%2Fx%7D",
  "%3Cscript%3E",
  "svc_",
  "constructor",
  "__proto__",
  "prototype",
  "toString",
  "null",
  "undefined",
  "0",
  "-1",
  "NaN"
] as const

/** A printable ASCII segment, percent-encoded where needed. */
const encodedSegment = fc.string({ minLength: 1, maxLength: 40 }).map((s) => encodeURIComponent(s))
/** A unicode segment, percent-encoded. */
const unicodeSegment = fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }).map((s) => encodeURIComponent(s))
/**
 * A segment of raw visible ASCII, unencoded (`%`, `'`, `"`, `<`, `\\`, …). Bytes above 0x7e are
 * refused by Node's HTTP parser itself, before the application sees the request (see the
 * "request line" test).
 */
const rawSegment = fc
  .array(fc.integer({ min: 0x21, max: 0x7e }).filter((b) => b !== 0x2f && b !== 0x3f && b !== 0x23), {
    minLength: 1,
    maxLength: 30
  })
  .map((bytes) => Buffer.from(bytes).toString("latin1"))

export const hostileSegment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_SEGMENTS) },
  { weight: 2, arbitrary: encodedSegment },
  { weight: 1, arbitrary: unicodeSegment },
  { weight: 1, arbitrary: rawSegment },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 2500 }).map((n) => "s".repeat(n)) }
)

/** Nested JSON `depth` levels deep, e.g. `[[[…]]]` or `{"a":{"a":…}}`, optionally wrapped in an object. */
export const deepJson = (depth: number, kind: "array" | "object", wrap = false): string => {
  const inner = kind === "array" ? "[".repeat(depth) + "]".repeat(depth) : "{\"a\":".repeat(depth) + "1" + "}".repeat(depth)
  return wrap ? `{"a":${inner}}` : inner
}

/** JSON documents an API might choke on (and bytes that are not JSON at all). */
export const hostileJson: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.constantFrom(
    "",
    " ",
    "null",
    "true",
    "0",
    "-0",
    "1e999",
    "\"\"",
    "[]",
    "{}",
    "{",
    "}",
    "{\"a\":}",
    "{\"__proto__\":{\"polluted\":true}}",
    "{\"constructor\":{\"prototype\":{\"x\":1}}}",
    "{\"auth_type\":\"oauth\",\"auth_type\":\"none\",\"extra\":1}",
    "{\"changes\":[],\"changes\":null}",
    "{\"changes\":{\"length\":1e9}}",
    "{\"changes\":[" +
      Array.from({ length: 150 }, () => "{\"op\":\"add_credential\",\"environment\":\"e\",\"service_uuid\":\"x\"}").join(",") +
      "]}",
    "{\"changes\":[{\"op\":\"remove_credential\",\"environment\":\"..\",\"service_uuid\":\"%00\",\"client_id\":\"' OR 1=1 --\"}]}",
    "{\"name\":\"" + "n".repeat(100_000) + "\",\"auth_type\":\"oauth\"}",
    "{\"auth_type\":\"oauth\",\"handler\":{\"type\":\"proxy\",\"url\":\"file:///etc/passwd\"}}",
    "{\"auth_type\":\"oauth\",\"handler\":{\"type\":\"proxy\",\"url\":\"http://" + "h".repeat(5000) + "\"}}",
    "{\"auth_type\":\"oauth\",\"handler\":{\"type\":\"eval\",\"code\":\"process.exit(1)\"}}",
    "\"\\ud800\"",
    "{\"a\":\"\\u0000\"}",
    "[" + "1,".repeat(50_000) + "1]",
    deepJson(1_000, "object"),
    "\ufeff{}"
  ),
  fc.uint8Array({ maxLength: 2048 }).map((bytes): string | Uint8Array => bytes),
  bytesWithInvalidUtf8.map((bytes): string | Uint8Array => Buffer.concat([Buffer.from("{\"name\":\""), bytes, Buffer.from("\"}")]))
)

/** Deeply nested documents (arrays and objects, bare and inside an object) within the size limit. */
export const deepJsonDocument = fc
  .tuple(fc.constantFrom(5_000, 10_000, 50_000), fc.constantFrom("array" as const, "object" as const), fc.boolean())
  .map(([depth, kind, wrap]): string | Uint8Array => deepJson(depth, kind, wrap))

/** Hostile JSON including deeply nested documents. */
export const hostileJsonDeep: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  { weight: 5, arbitrary: hostileJson },
  { weight: 1, arbitrary: deepJsonDocument }
)

/** Total size of the request line and headers: Node refuses more than 16 KiB with a bare 431. */
export const headerBytes = (request: RawRequest): number =>
  request.method.length + request.path.length + 12 +
  Object.entries(request.headers ?? {}).reduce(
    (sum, [name, value]) => sum + name.length + 4 + (typeof value === "string" ? value.length : value.join("").length),
    0
  )
