/**
 * Serves the profile editor (`src/web/admin`) at `GET /admin` and its assets at
 * `GET /admin/assets/:file` (the icon also at `GET /favicon.ico`); `GET /` redirects to the editor; the API reference (ApiReference.ts)
 * is at `GET /docs`. Files are read once at start; only names found there are served, so no
 * path can reach outside the folder.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { Api } from "../server/Api.js"
import { editorModule } from "../domain/Limits.js"
import { PACKAGE_ROOT } from "../config/PackageRoot.js"
import * as ApiReference from "./ApiReference.js"
import { notFound as unknownPath } from "../server/ServerErrors.js"

/** Served from the sources: the pages are not compiled, so `dist/` holds no copy of them. */
const WEB_ROOT = join(PACKAGE_ROOT, "src/web/admin/")

const CONTENT_TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon"
}

/** A web file's content type by its extension; undefined for anything else, which is never served. */
const contentTypeOf = (name: string): string | undefined => CONTENT_TYPES[name.split(".").pop() ?? ""]

const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

/** The editor's module of the server's limits (domain/Limits.ts), made at start rather than kept as a file. */
const LIMITS_MODULE = "Limits.js"

/** The icon of every page, also answered at `/favicon.ico`. */
const FAVICON = "favicon.svg"

const readOptional = (path: string) => Effect.promise(() => readFile(path).catch(() => undefined))

const notFound = HttpServerResponse.unsafeJson(
  { error: "not_found", error_description: "No such asset" },
  { status: 404 }
)

export const layer = HttpApiBuilder.group(Api, "web", (handlers) =>
  Effect.gen(function*() {
    const page = yield* readOptional(`${WEB_ROOT}index.html`)
    const names = yield* Effect.promise(() => readdir(`${WEB_ROOT}assets`).catch(() => [] as Array<string>))
    const assets = new Map<string, Buffer>()
    // Only web files: anything else kept beside them is not served.
    for (const name of names.filter((name) => contentTypeOf(name) !== undefined)) {
      const content = yield* readOptional(`${WEB_ROOT}assets/${name}`)
      if (content !== undefined) assets.set(name, content)
    }
    // The limits the editor shows, from the module the server enforces them with.
    assets.set(LIMITS_MODULE, Buffer.from(editorModule()))
    const scalarScript = yield* Effect.cached(ApiReference.loadScalarScript)
    const respond = (content: Buffer, name: string) =>
      HttpServerResponse.uint8Array(content, {
        contentType: contentTypeOf(name),
        headers: SECURITY_HEADERS
      })
    return handlers
      // Someone who opens the server's address in a browser wants the editor. Only "/" itself: the
      // router also matches "//", which stays the 404 it always was.
      .handle("home", () =>
        Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
          request.url.split("?")[0] === "/"
            ? HttpServerResponse.redirect("/admin", { status: 302 })
            : unknownPath(request.method)))
      // Browsers ask for /favicon.ico whatever the page says: the editor's icon (SVG, which they take
      // by its content type), rather than a 404 in every console.
      .handle("favicon", () => {
        const icon = assets.get(FAVICON)
        return Effect.succeed(icon === undefined ? notFound : respond(icon, FAVICON))
      })
      .handle("adminPage", () => Effect.succeed(page === undefined ? notFound : respond(page, "index.html")))
      .handle("adminAsset", ({ path }) => {
        const content = assets.get(path.file)
        return Effect.succeed(content === undefined ? notFound : respond(content, path.file))
      })
      .handle("apiReference", () => Effect.succeed(ApiReference.pageResponse))
      .handle("apiReferenceScript", ({ request }) =>
        Effect.map(scalarScript, (script) => ApiReference.scriptResponse(script, request.headers)))
  }))
