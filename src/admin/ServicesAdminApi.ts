/**
 * The admin JSON API of services and their credentials, behind the admin token (see `AdminApi.ts`
 * for the middlewares and paths they share).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ConflictWire, CredentialLimitExceededWire, InvalidRequestWire, NotFoundWire } from "../domain/Errors.js"
import { CredentialInput, KeyCredentialInput, NewCredential, NewKeyCredential, ServiceDocument, ServiceInput } from "../domain/Models.js"
import { KEY_ON_CREDENTIALS_SUNSET } from "../domain/Deprecations.js"
import { adminGroup, created, CredentialList, CredentialPath, EnvironmentPath, NoContent, ServicePath } from "./AdminApi.js"
import { FederatedCredentialInput, NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"

export class ServicesApi extends adminGroup(
  HttpApiGroup.make("services")
    .add(
      HttpApiEndpoint.post("createService", "/admin/profiles/:profile/environments/:environment/services")
        .annotate(OpenApi.Summary, "Create a service")
        .setPath(EnvironmentPath)
        .setPayload(ServiceInput)
        .addSuccess(ServiceDocument, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .annotate(
          OpenApi.Description,
          "Creates a service with a new random uuid. A proxy URL set by a token other than an admin's must target an origin the upstream policy allows (UPSTREAM_ALLOWED_ORIGINS, the profile's upstream_origins; without either, no internal address): otherwise 400 invalid_request saying why."
        )
    )
    .add(
      HttpApiEndpoint.put("putService", "/admin/profiles/:profile/environments/:environment/services/:uuid")
        .annotate(OpenApi.Summary, "Create or replace a service")
        .annotate(
          OpenApi.Description,
          "Creates the service under this uuid (201) or replaces its name, auth_type and handler (200). Switching auth_type away from oauth makes its credentials' tokens useless at once. A proxy URL is judged as for creation, unless an admin token set this very URL."
        )
        .setPath(ServicePath)
        .setPayload(ServiceInput)
        .addSuccess(ServiceDocument.annotations({ description: "The service existed and was updated." }))
        .addSuccess(...created(ServiceDocument, "The service was created."))
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.get("getService", "/admin/profiles/:profile/environments/:environment/services/:uuid")
        .annotate(OpenApi.Summary, "Get a service")
        .annotate(OpenApi.Description, "The service with its credentials (never a secret).")
        .setPath(ServicePath)
        .addSuccess(ServiceDocument)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.del("deleteService", "/admin/profiles/:profile/environments/:environment/services/:uuid")
        .annotate(OpenApi.Summary, "Delete a service")
        .annotate(OpenApi.Description, "Deletes the service; its credentials' tokens die at once.")
        .setPath(ServicePath)
        .addSuccess(NoContent)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.get(
        "listCredentials",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/credentials"
      )
        .annotate(OpenApi.Summary, "List a service's credentials")
        .annotate(OpenApi.Description, "At most two live credentials, with creation and last use times (never a secret).")
        .setPath(ServicePath)
        .addSuccess(CredentialList)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.post(
        "createCredential",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/credentials"
      )
        .annotate(OpenApi.Summary, "Generate a secret credential")
        .setPath(ServicePath)
        // Decoded as before, key bodies included (deprecated, see below); the document shows
        // CredentialInput only (OpenApiDocument). The key first: CredentialInput drops public_key.
        .setPayload(Schema.Union(KeyCredentialInput, CredentialInput))
        .addSuccess(NewCredential, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .addError(CredentialLimitExceededWire)
        .annotate(
          OpenApi.Description,
          "Generates a secret credential (client_secret_basic); the answer is the only time its client_secret is " +
            "shown. Counts toward the limit of 2; sets the service's auth_type to oauth. `expires_at` (RFC 3339): then " +
            "refused as if deleted; under the profile's credential_max_lifetime_days, at most that many days ahead " +
            "(absent: exactly). Deprecated: a body with `public_key` still creates a key credential here, answered as by " +
            "POST …/key-credentials, with `Deprecation`, `Sunset` (" + KEY_ON_CREDENTIALS_SUNSET + ") and " +
            "`Link: <…/key-credentials>; rel=\"successor-version\"` headers; use POST …/key-credentials."
        )
    )
    .add(
      HttpApiEndpoint.post(
        "createKeyCredential",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/key-credentials"
      )
        .annotate(OpenApi.Summary, "Add a key credential")
        .setPath(ServicePath)
        .setPayload(KeyCredentialInput)
        .addSuccess(NewKeyCredential, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .addError(CredentialLimitExceededWire)
        .annotate(
          OpenApi.Description,
          "Adds a key credential (private_key_jwt) for {\"public_key\": JWK or PEM}: no secret; the key's type, kid and " +
            "thumbprint answered. Counts toward the limit of 2 with the secret credentials; sets the service's auth_type " +
            "to oauth. `expires_at` as for POST …/credentials."
        )
    )
    .add(
      HttpApiEndpoint.post(
        "createFederatedCredential",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/federated-credentials"
      )
        .annotate(OpenApi.Summary, "Add a federated credential")
        .setPath(ServicePath)
        .setPayload(FederatedCredentialInput)
        .addSuccess(NewFederatedCredential, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .addError(CredentialLimitExceededWire)
        .annotate(
          OpenApi.Description,
          "Adds a federated credential (workload identity federation) for {\"issuer\": a trusted issuer's name, " +
            "\"subject\": the exact sub, \"claims\": exact values of other claims}: nothing secret is created. Its client " +
            "sends its workload's token from that issuer as client_assertion (client_assertion_type jwt-bearer) with " +
            "client_id. 400 when no trusted issuer of that name allows the profile. Counts toward the limit of 2; sets " +
            "the service's auth_type to oauth. `expires_at` as for POST …/credentials."
        )
    )
    .add(
      HttpApiEndpoint.del(
        "deleteCredential",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/credentials/:client_id"
      )
        .annotate(OpenApi.Summary, "Delete a credential")
        .setPath(CredentialPath)
        .addSuccess(NoContent)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .annotate(OpenApi.Description, "Deletes the credential; every token issued with it is refused from now on.")
    )
    .addError(ConflictWire)
)
  .annotate(OpenApi.Title, "Admin: services and credentials")
  .annotate(
    OpenApi.Description,
    "Services in an environment, and their credentials: at most two live ones per service, so a secret " +
      "can be rotated without downtime. A secret is shown once, when it is generated."
  )
{}
