/**
 * The whole HTTP contract as one `HttpApi`. Nothing here imports server code: `openapi.yaml` is
 * generated from this value (`npm run openapi`) and served at `GET /openapi.yaml`.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { SERVICE_VERSION } from "../config/Version.js"
import * as AdminApi from "../admin/AdminApi.js"
import { AdminTokensApi, SessionApi } from "../admin/AdminTokensApi.js"
import { CredentialIntrospectionApi } from "../admin/CredentialIntrospectionApi.js"
import { DiscoveryApi } from "./DiscoveryApi.js"
import { MetricsApi } from "../observability/MetricsApi.js"
import { ServiceApi } from "../service-call/ServiceApi.js"
import { ServicesApi } from "../admin/ServicesAdminApi.js"
import { TokenApi } from "../token/TokenApi.js"
import { TrustedIssuersApi } from "../federation/TrustedIssuersApi.js"
import { WebApi } from "../web/WebApi.js"

export class Api extends HttpApi.make("service-auth")
  .add(TokenApi)
  .add(ServiceApi)
  .add(AdminApi.ProfilesApi)
  .add(ServicesApi)
  .add(CredentialIntrospectionApi)
  .add(AdminApi.AuditApi)
  .add(AdminApi.KeysApi)
  .add(AdminTokensApi)
  .add(TrustedIssuersApi)
  .add(SessionApi)
  .add(DiscoveryApi)
  .add(WebApi)
  .add(MetricsApi)
  .annotate(OpenApi.Title, "service-auth")
  .annotate(OpenApi.Version, SERVICE_VERSION)
  .annotate(
    OpenApi.Description,
    "OAuth 2.0 Client Credentials authorization server and service gateway. Every error body is " +
      "exactly {\"error\", \"error_description\"}."
  )
{}
