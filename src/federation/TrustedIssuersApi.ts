/**
 * Trusted issuers of workload identity federation (`TrustedIssuers`), managed by admin tokens only
 * (403 forbidden for the others): `GET/POST /admin/trusted-issuers`, `GET/PUT/DELETE
 * /admin/trusted-issuers/{name}`. `GET /admin/profiles/{profile}/trusted-issuers` shows any token
 * that reads a profile the issuers it may use, without what is the operator's alone. Nothing here
 * imports server code.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ConflictWire, InvalidRequestWire, NotFoundWire } from "../domain/Errors.js"
import { TrustedIssuerName } from "../domain/FederatedCredential.js"
import { ProfileId } from "../domain/Identifiers.js"
import { ProfileTrustedIssuerList, TrustedIssuerDocument, TrustedIssuerInput, TrustedIssuerList } from "../domain/TrustedIssuers.js"
import { adminGroup, created, NoContent } from "../admin/AdminApi.js"

const IssuerPath = Schema.Struct({ name: TrustedIssuerName })

/** What `POST /admin/trusted-issuers` sends: the issuer with its name. */
export const NewTrustedIssuer = Schema.Struct({ name: TrustedIssuerName, ...TrustedIssuerInput.fields }).annotations({
  identifier: "NewTrustedIssuer",
  parseOptions: { onExcessProperty: "error" }
})

export class TrustedIssuersApi extends adminGroup(
  HttpApiGroup.make("trustedIssuers")
    .add(
      HttpApiEndpoint.get("listTrustedIssuers", "/admin/trusted-issuers")
        .annotate(OpenApi.Summary, "List the trusted issuers")
        .addSuccess(TrustedIssuerList)
    )
    .add(
      HttpApiEndpoint.post("createTrustedIssuer", "/admin/trusted-issuers")
        .annotate(OpenApi.Summary, "Register a trusted issuer")
        .annotate(OpenApi.Description, "Registers the issuer under its name; 409 conflict when the name is taken.")
        .setPayload(NewTrustedIssuer)
        .addSuccess(TrustedIssuerDocument, { status: 201 })
        .addError(InvalidRequestWire)
        .addError(ConflictWire)
    )
    .add(
      HttpApiEndpoint.get("getTrustedIssuer", "/admin/trusted-issuers/:name")
        .annotate(OpenApi.Summary, "Get a trusted issuer")
        .setPath(IssuerPath)
        .addSuccess(TrustedIssuerDocument)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
    .add(
      HttpApiEndpoint.put("putTrustedIssuer", "/admin/trusted-issuers/:name")
        .annotate(OpenApi.Summary, "Register or replace a trusted issuer")
        .annotate(
          OpenApi.Description,
          "Registers the issuer under this name (201) or replaces it whole (200). Every instance uses the new settings " +
            "from its next token request on; keys are fetched anew for a changed issuer URL."
        )
        .setPath(IssuerPath)
        .setPayload(TrustedIssuerInput)
        .addSuccess(TrustedIssuerDocument.annotations({ description: "The issuer existed and was replaced." }))
        .addSuccess(...created(TrustedIssuerDocument, "The issuer was registered."))
        .addError(InvalidRequestWire)
        .addError(ConflictWire)
    )
    .add(
      HttpApiEndpoint.del("deleteTrustedIssuer", "/admin/trusted-issuers/:name")
        .annotate(OpenApi.Summary, "Delete a trusted issuer")
        .annotate(
          OpenApi.Description,
          "Deletes the issuer. 409 conflict, naming them, while live federated credentials use it: delete those first " +
            "(which ends their tokens at once)."
        )
        .setPath(IssuerPath)
        .addSuccess(NoContent)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .addError(ConflictWire)
    )
    .add(
      HttpApiEndpoint.get("listProfileTrustedIssuers", "/admin/profiles/:profile/trusted-issuers")
        .annotate(OpenApi.Summary, "List the trusted issuers a profile may use")
        .annotate(
          OpenApi.Description,
          "The trusted issuers that allow the profile, by name: what its federated credentials may name, with what their " +
            "workloads' tokens must carry (audience, algorithms, longest lifetime); not their keys or other profiles. For " +
            "any token that reads the profile (an owner or a viewer too); 404 for a profile it does not reach."
        )
        .setPath(Schema.Struct({ profile: ProfileId }))
        .addSuccess(ProfileTrustedIssuerList)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
    )
)
  .annotate(OpenApi.Title, "Admin: trusted issuers")
  .annotate(
    OpenApi.Description,
    "Issuers whose tokens federated credentials accept in place of a secret (workload identity federation: a " +
      "Kubernetes cluster, GitHub Actions, a SPIFFE trust domain, any OIDC issuer); managed by admin tokens only, " +
      "listed for a profile to any token that reads it."
  )
{}
