/** Discovery and operations (docs/contract.md §4): JWKS, RFC 8414 metadata, health, and this API's own OpenAPI document. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { StorageUnavailableWire } from "../domain/Errors.js"

export const Jwks = Schema.Struct({
  keys: Schema.Array(
    Schema.Struct({
      kty: Schema.Literal("RSA"),
      kid: Schema.String,
      alg: Schema.Literal("RS256"),
      use: Schema.Literal("sig"),
      n: Schema.String,
      e: Schema.String
    })
  )
}).annotations({ identifier: "JsonWebKeySet", description: "RFC 7517 public keys that verify issued tokens, by kid." })

export const AuthorizationServerMetadata = Schema.Struct({
  issuer: Schema.String,
  token_endpoint: Schema.String,
  jwks_uri: Schema.String,
  grant_types_supported: Schema.Array(Schema.String),
  token_endpoint_auth_methods_supported: Schema.Array(Schema.String),
  token_endpoint_auth_signing_alg_values_supported: Schema.optional(Schema.Array(Schema.String)),
  revocation_endpoint: Schema.String.annotations({ description: "POST /oauth/revoke (RFC 7009)." }),
  revocation_endpoint_auth_methods_supported: Schema.Array(Schema.String).annotations({
    description: "As at the token endpoint: client_secret_post, client_secret_basic and private_key_jwt."
  }),
  revocation_endpoint_auth_signing_alg_values_supported: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "The algorithms of a private_key_jwt assertion, as at the token endpoint."
  }),
  introspection_endpoint: Schema.String.annotations({ description: "POST /oauth/introspect (RFC 7662)." }),
  introspection_endpoint_auth_methods_supported: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "As at the token endpoint: client_secret_post, client_secret_basic and private_key_jwt, for a credential " +
      "an admin allowed to introspect (introspect_profiles). An admin or introspector token sent as Bearer works too; " +
      "no registered method names it, so it is not listed."
  }),
  introspection_endpoint_auth_signing_alg_values_supported: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "The algorithms of a private_key_jwt assertion, as at the token endpoint."
  }),
  dpop_signing_alg_values_supported: Schema.optional(Schema.Array(Schema.String)),
  scopes_supported: Schema.Array(Schema.String),
  response_types_supported: Schema.Array(Schema.String),
  service_documentation: Schema.optional(Schema.String)
}).annotations({ identifier: "AuthorizationServerMetadata", description: "RFC 8414 metadata." })

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })
/** `/healthz`: the process is up, and which release it runs (semantic version, docs/releases.md). */
export const Liveness = Schema.Struct({
  status: Schema.Literal("ok"),
  version: Schema.String.annotations({
    description: "The release the server runs (semantic version), as package.json says.",
    examples: ["1.0.0"]
  })
}).annotations({ identifier: "Liveness" })

export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(
    HttpApiEndpoint.get("jwks", "/.well-known/jwks.json")
      .annotate(OpenApi.Summary, "Public signing keys (JWKS)")
      .annotate(OpenApi.Description, "RFC 7517 JSON Web Key Set of the keys that verify issued tokens, by kid.")
      .addSuccess(Jwks)
  )
  .add(
    HttpApiEndpoint.get("metadata", "/.well-known/oauth-authorization-server")
      .annotate(OpenApi.Summary, "Authorization server metadata (RFC 8414)")
      .annotate(
        OpenApi.Description,
        "Where the token endpoint and the keys are, and what this server supports. Clients discover it at /.well-known/oauth-authorization-server (there is no OpenID configuration)."
      )
      .addSuccess(AuthorizationServerMetadata)
  )
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .annotate(OpenApi.Summary, "Liveness")
      .addSuccess(Liveness)
      .annotate(OpenApi.Description, "The process is up.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .annotate(OpenApi.Summary, "Readiness")
      .addSuccess(Health)
      .addError(StorageUnavailableWire)
      .annotate(OpenApi.Description, "The database answers.")
  )
  .add(
    HttpApiEndpoint.get("openapi", "/openapi.yaml")
      .annotate(OpenApi.Summary, "This OpenAPI document")
      .addSuccess(HttpApiSchema.Text({ contentType: "application/yaml" }))
      .annotate(OpenApi.Description, "This document.")
  )
  .annotate(OpenApi.Title, "Discovery and operations")
  .annotate(
    OpenApi.Description,
    "What clients and resource servers discover (RFC 8414 metadata, the JWKS), and what load balancers probe."
  )
{}
