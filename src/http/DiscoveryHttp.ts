/** Discovery and operations: JWKS, RFC 8414 metadata, liveness, readiness and the OpenAPI document. */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Api } from "../api/Api.js"
import { openApiYaml } from "../api/OpenApiDocument.js"
import { KeyService } from "../auth/KeyService.js"
import { SERVICE_CALL_SCOPE } from "../domain/AccessTokens.js"
import { CredentialRepo } from "../storage/CredentialRepo.js"

export const layer = HttpApiBuilder.group(Api, "discovery", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* KeyService
    const repo = yield* CredentialRepo
    const { issuer } = yield* AppConfig
    const jwks = { keys: keys.jwks.keys.map(({ kty, kid, alg, use, n, e }) => ({ kty: kty as "RSA", kid, alg, use, n: n!, e: e! })) }
    const metadata = {
      issuer,
      token_endpoint: `${issuer}/oauth/token`,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      grant_types_supported: ["client_credentials"],
      token_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic"],
      scopes_supported: [SERVICE_CALL_SCOPE],
      response_types_supported: [],
      service_documentation: `${issuer}/openapi.yaml`
    }
    const openapi = openApiYaml()
    return handlers
      .handle("jwks", () => Effect.succeed(jwks))
      .handle("metadata", () => Effect.succeed(metadata))
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () => Effect.as(repo.ping, { status: "ok" as const }))
      .handle("openapi", () =>
        Effect.succeed(HttpServerResponse.text(openapi, { contentType: "application/yaml; charset=utf-8" })))
  }))
