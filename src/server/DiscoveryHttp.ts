/** Discovery and operations: JWKS, RFC 8414 metadata, liveness, readiness and the OpenAPI document. */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig } from "../config/AppConfig.js"
import { SERVICE_VERSION } from "../config/Version.js"
import { Api } from "./Api.js"
import { KeyService } from "../keys/KeyService.js"
import { SERVICE_CALL_SCOPE } from "../domain/AccessTokens.js"
import { SIGNING_ALGORITHMS } from "../domain/KeyCredential.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import { ServedOpenApi } from "./ServedOpenApi.js"

/** How clients authenticate, at the token, revocation and introspection endpoints alike (`FormClientAuthentication`). */
const CLIENT_AUTH_METHODS = ["client_secret_post", "client_secret_basic", "private_key_jwt"]

export const layer = HttpApiBuilder.group(Api, "discovery", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* KeyService
    const queries = yield* CatalogueQueries
    const { issuer, keyPublishDelaySeconds } = yield* AppConfig
    // Resource servers that honour it refetch well within the publication delay, so they hold a
    // new key before its first token (half the delay, at most a minute).
    const jwksHeaders = { "cache-control": `public, max-age=${Math.min(60, Math.floor(keyPublishDelaySeconds / 2))}` }
    const jwks = Effect.map(keys.jwks, ({ keys }) =>
      HttpServerResponse.unsafeJson(
        { keys: keys.map(({ kty, kid, alg, use, n, e }) => ({ kty, kid, alg, use, n, e })) },
        { headers: jwksHeaders }
      ))
    const metadata = {
      issuer,
      token_endpoint: `${issuer}/oauth/token`,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      grant_types_supported: ["client_credentials"],
      token_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      token_endpoint_auth_signing_alg_values_supported: SIGNING_ALGORITHMS,
      dpop_signing_alg_values_supported: SIGNING_ALGORITHMS,
      // Revocation authenticates the client as the token endpoint does.
      revocation_endpoint: `${issuer}/oauth/revoke`,
      revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      revocation_endpoint_auth_signing_alg_values_supported: SIGNING_ALGORITHMS,
      // A credential allowed to introspect authenticates as at the token endpoint. An admin token as
      // Bearer works too, but no registered method names it (RFC 8414 §2): not listed.
      introspection_endpoint: `${issuer}/oauth/introspect`,
      introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      introspection_endpoint_auth_signing_alg_values_supported: SIGNING_ALGORITHMS,
      scopes_supported: [SERVICE_CALL_SCOPE],
      response_types_supported: [],
      service_documentation: `${issuer}/openapi.yaml`
    }
    // Built on the first request: the document's build and the YAML package are no part of a start.
    const served = yield* ServedOpenApi
    const openapi = Effect.map(served.yaml, (yaml) => HttpServerResponse.text(yaml, { contentType: "application/yaml; charset=utf-8" }))
    return handlers
      .handle("jwks", () => jwks)
      .handle("metadata", () => Effect.succeed(metadata))
      .handle("healthz", () => Effect.succeed({ status: "ok" as const, version: SERVICE_VERSION }))
      .handle("readyz", () => Effect.as(queries.ping, { status: "ok" as const }))
      .handle("openapi", () => openapi)
  }))
