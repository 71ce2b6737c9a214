/**
 * The API's paths, from the contract itself (`HttpApi.reflect`): which methods a path answers (for
 * 405 and `Allow`), and which route template a request path belongs to (for logs and metrics,
 * never the raw path, whose segments are whatever a client sent).
 */
import { HttpApi } from "@effect/platform"
import { Api } from "./Api.js"

/** A router path as OpenAPI writes it: /admin/profiles/:profile is /admin/profiles/{profile}. */
const toTemplate = (path: string) => path.replace(/:([A-Za-z_]+)/g, "{$1}")

/** Every path of the API as a pattern, with the methods it answers (HEAD wherever GET is). */
const ROUTES = (() => {
  const byPath = new Map<string, Set<string>>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const methods = byPath.get(endpoint.path) ?? new Set<string>()
      methods.add(endpoint.method)
      if (endpoint.method === "GET") methods.add("HEAD")
      byPath.set(endpoint.path, methods)
    }
  })
  const escape = (literal: string) => literal.replace(/[.*+?^$|()[\]{}\\]/g, "\\$&")
  const segment = (part: string) => (part.startsWith(":") ? "[^/]+" : escape(part))
  return [...byPath].map(([path, methods]) => ({
    pattern: new RegExp(`^${path.split("/").map(segment).join("/")}$`),
    template: toTemplate(path),
    methods
  }))
})()

/** Every route template of the API: the closed set a request's route label is drawn from. */
export const ROUTE_TEMPLATES: ReadonlyArray<string> = ROUTES.map((route) => route.template)

const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

/** The methods the API answers at `pathname`; none for a path it does not have. */
export const allowedMethods = (pathname: string): ReadonlyArray<string> => {
  const allowed = new Set<string>()
  for (const route of ROUTES) if (route.pattern.test(pathname)) route.methods.forEach((m) => allowed.add(m))
  return METHOD_ORDER.filter((method) => allowed.has(method))
}

/** The template of an endpoint's path, by the endpoint's name in the API (`issueToken`). */
export const endpointTemplate = (() => {
  const byName = new Map<string, string>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => byName.set(endpoint.name, toTemplate(endpoint.path))
  })
  return (name: string): string => {
    const template = byName.get(name)
    if (template === undefined) throw new Error(`no endpoint named ${name}`)
    return template
  }
})()

/** The template of the route `pathname` belongs to (`/admin/profiles/{profile}`), or undefined. */
export const routeTemplate = (pathname: string): string | undefined => ROUTES.find((route) => route.pattern.test(pathname))?.template
