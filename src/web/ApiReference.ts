/**
 * The interactive API reference at `GET /docs`: Scalar's standalone bundle, the copy that
 * `@effect/platform` ships, reading `openapi.yaml` from this server. The page is a small HTML file
 * that configures Scalar through data attributes (no inline script) and loads the bundle from
 * `GET /docs/scalar.js`, so its Content-Security-Policy can keep every other origin out. Scalar
 * takes a second or two to parse and render: until its app has content, the page says it is loading
 * (a style rule hides the line then; no script of ours is needed).
 */
import { type Headers, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { gzip } from "node:zlib"

const SCRIPT_PATH = "/docs/scalar.js"

/**
 * Scalar works under nothing stricter than this (tried in Chromium, Scalar 1.39.3):
 * - `'wasm-unsafe-eval'`: it hashes with xxhash compiled from WebAssembly bytes in the bundle, and
 *   renders nothing when that is refused. It allows WebAssembly only, not `eval` of JavaScript.
 * - `style-src 'unsafe-inline'`: it injects five `<style>` elements at run time (its components'
 *   CSS, the theme, toasts, the code editor) and sets `style` attributes on dozens of elements as
 *   it renders, with computed values no hash can foresee; the elements' text changes with Scalar's
 *   version and configuration. Styles only: scripts stay `'self'`.
 * It still tries `new Function("")` once (its validation library asking whether it may compile);
 * the refusal is caught, and it interprets instead: `'unsafe-eval'` is not needed.
 * `connect-src 'self'` lets it read `/openapi.yaml` and send test requests here, and nowhere else.
 */
const CONTENT_SECURITY_POLICY = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const COMMON_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // Revalidated on every load: the page is tiny, and the script answers 304 to its ETag.
  "cache-control": "no-cache"
}

/**
 * Scalar's options that would reach the internet, all off: its fonts (fonts.scalar.com), usage
 * events (api.scalar.com), the "open in client" button (client.scalar.com) and the toolbar that
 * uploads the document to share it. No `proxyUrl`: test requests go straight from the browser.
 */
const SCALAR_CONFIGURATION = {
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showToolbar: "never",
  // The document names the local development server; test requests go to the server that served
  // this page instead, whatever its host (Scalar resolves "/" against the page's origin).
  servers: [{ url: "/", description: "This server" }]
}

const escapeAttribute = (text: string) => text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

// Paths without a host, so the page works under any ISSUER or Host header; absolute paths, because
// the router serves this page at "/docs/" too, where "openapi.yaml" would mean /docs/openapi.yaml.
const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="referrer" content="no-referrer">
  <link rel="icon" href="/admin/assets/favicon.svg" type="image/svg+xml">
  <title>API reference · service-auth</title>
  <style>
    .docs-loading { font: 1rem/1.5 system-ui, sans-serif; color: #444; margin: 3rem auto; max-width: 36rem; padding: 0 1rem; }
    .docs-loading a { color: #1f4fd1; }
    body:has([data-v-app] > *) .docs-loading { display: none; }
  </style>
</head>
<body>
  <p class="docs-loading" role="status">Loading the API reference… (the document itself is
    <a href="/openapi.yaml">openapi.yaml</a>)</p>
  <noscript><p>The API reference needs JavaScript; the document itself is <a href="/openapi.yaml">openapi.yaml</a>.</p></noscript>
  <script id="api-reference" type="application/json" data-url="/openapi.yaml"
    data-configuration="${escapeAttribute(JSON.stringify(SCALAR_CONFIGURATION))}"></script>
  <script src="${SCRIPT_PATH}"></script>
</body>
</html>
`

export const pageResponse = HttpServerResponse.text(PAGE, {
  contentType: "text/html; charset=utf-8",
  headers: { "content-security-policy": CONTENT_SECURITY_POLICY, ...COMMON_HEADERS }
})

export interface ScalarScript {
  readonly plain: Uint8Array
  readonly gzipped: Uint8Array
  /** Strong validators, one per representation (RFC 9110 §8.8.3). */
  readonly etag: string
  readonly gzippedEtag: string
}

/**
 * Scalar's bundle as `@effect/platform` holds it: a 3.4 MB string in a module its package does not
 * export, found beside the `HttpApiScalar` module it does. Read once, on the first request, so a
 * server nobody reads the reference of never holds it; compressed off the event loop.
 */
export const loadScalarScript: Effect.Effect<ScalarScript> = Effect.gen(function*() {
  const plain = yield* Effect.sync(() => {
    const requireHere = createRequire(import.meta.url)
    const modulePath = join(dirname(requireHere.resolve("@effect/platform/HttpApiScalar")), "internal", "httpApiScalar.js")
    const source: unknown = requireHere(modulePath).javascript
    // The module's string (6.5 MB in memory) is let go; the UTF-8 bytes are what is served.
    delete requireHere.cache[modulePath]
    if (typeof source !== "string") throw new Error(`${modulePath} holds no Scalar bundle`)
    return new Uint8Array(Buffer.from(source, "utf8"))
  })
  const gzipped = new Uint8Array(yield* Effect.promise(() => promisify(gzip)(plain)))
  const hash = createHash("sha256").update(plain).digest("base64url").slice(0, 27)
  return { plain, gzipped, etag: `"${hash}"`, gzippedEtag: `"${hash}-gzip"` }
})

/** Whether `Accept-Encoding` takes gzip: named (or `*`) without `q=0`. */
const acceptsGzip = (acceptEncoding: string | undefined) =>
  (acceptEncoding ?? "").split(",").some((coding) => {
    const [name = "", ...parameters] = coding.split(";").map((part) => part.trim().toLowerCase())
    return (name === "gzip" || name === "*") && !parameters.some((p) => /^q=0(\.0*)?$/.test(p))
  })

/** Whether `If-None-Match` names `etag` (weak comparison, as RFC 9110 §13.1.2 says for GET). */
const matches = (ifNoneMatch: string | undefined, etag: string) =>
  ifNoneMatch !== undefined &&
  ifNoneMatch.split(",").some((tag) => {
    const trimmed = tag.trim()
    return trimmed === "*" || trimmed.replace(/^W\//, "") === etag
  })

/** The script, gzipped when the client takes it, or 304 when the client's copy is current. */
export const scriptResponse = (script: ScalarScript, headers: Headers.Headers) => {
  const gzipped = acceptsGzip(headers["accept-encoding"])
  const etag = gzipped ? script.gzippedEtag : script.etag
  const responseHeaders = {
    ...COMMON_HEADERS,
    etag,
    vary: "accept-encoding",
    ...(gzipped ? { "content-encoding": "gzip" } : {})
  }
  return matches(headers["if-none-match"], etag)
    ? HttpServerResponse.empty({ status: 304, headers: responseHeaders })
    : HttpServerResponse.uint8Array(gzipped ? script.gzipped : script.plain, {
      contentType: "text/javascript; charset=utf-8",
      headers: responseHeaders
    })
}
