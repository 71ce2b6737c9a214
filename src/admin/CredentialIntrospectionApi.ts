/**
 * Which tokens a credential may introspect (`introspect_profiles`): the operator lets a resource
 * server's credential call `POST /oauth/introspect` with the client authentication it already uses
 * at the token endpoint, for the access tokens of the profiles listed. An admin token only: the
 * list crosses profiles, so it is the operator's decision, never a profile owner's.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { adminGroup, CredentialPath } from "./AdminApi.js"
import { InvalidRequestWire, NotFoundWire } from "../domain/Errors.js"
import { ProfileId } from "../domain/Identifiers.js"
import { CredentialInfo } from "../domain/Models.js"

/** At most this many profiles in one list: a resource server serves a few. */
export const INTROSPECT_PROFILES_MAX = 100

export const IntrospectProfilesInput = Schema.Struct({
  introspect_profiles: Schema.NullOr(
    Schema.Array(ProfileId).pipe(Schema.maxItems(INTROSPECT_PROFILES_MAX, {
      message: () => `at most ${INTROSPECT_PROFILES_MAX} profiles`
    }))
  ).annotations({
    description: "The profiles whose access tokens the credential may introspect (stored sorted, each once); " +
      "[] or null: none, it may not introspect. Replaces the list it had."
  })
}).annotations({ identifier: "IntrospectProfilesInput" })

export class CredentialIntrospectionApi extends adminGroup(
  HttpApiGroup.make("credentialIntrospection")
    .add(
      HttpApiEndpoint.put(
        "putIntrospectProfiles",
        "/admin/profiles/:profile/environments/:environment/services/:uuid/credentials/:client_id/introspect_profiles"
      )
        .annotate(OpenApi.Summary, "Allow a credential to introspect tokens")
        .setPath(CredentialPath)
        .setPayload(IntrospectProfilesInput)
        .addSuccess(CredentialInfo)
        .addError(InvalidRequestWire)
        .addError(NotFoundWire)
        .annotate(
          OpenApi.Description,
          "Admin tokens only (any other role: 403). Sets the profiles whose access tokens this live credential may " +
            "introspect at POST /oauth/introspect, where it authenticates exactly as at the token endpoint " +
            "(client_secret_basic, client_secret_post, private_key_jwt): a token of a listed profile is answered as the " +
            "gateway would take it, any other token {\"active\":false}. [] or null takes the permission away; a credential " +
            "without one is refused there with 403 unauthorized_client. The answer is the credential as listed, with " +
            "introspect_profiles. Recorded as credential.changed. A credential not live on this service: 404."
        )
    )
)
  .annotate(OpenApi.Title, "Admin: credentials that introspect")
  .annotate(
    OpenApi.Description,
    "A resource server introspects tokens with a credential of its own, allowed here for the tokens of listed profiles."
  )
{}
