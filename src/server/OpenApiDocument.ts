/**
 * The OpenAPI document of `Api`, as served and as committed in `openapi.yaml`.
 *
 * What the schemas cannot say is stated once here, as data: how the token endpoint and the service
 * call authenticate (their handlers parse `Authorization` themselves, docs/contract.md §1-2), which
 * bodies may be left out, the headers answers carry, and where a local server listens.
 *
 * HttpApi declares its own decode error (400 `HttpApiDecodeError`) on every endpoint, and offers no
 * way not to. The server never sends it: a path or payload that does not decode is answered as the
 * contract's `400 invalid_request` (`server/ServerErrors.ts`). So the document shows that instead:
 * the framework's error is removed from unions where it sits beside ours, and where it is the only
 * 400 the response says `invalid_request`.
 */
import { OpenApi } from "@effect/platform"
import { Api } from "./Api.js"
import { KEY_ON_CREDENTIALS_DEPRECATION, KEY_ON_CREDENTIALS_SUNSET } from "../domain/Deprecations.js"
import { discriminateUnions } from "./OpenApiDiscriminators.js"
import { toYaml } from "./Yaml.js"

const FRAMEWORK_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]
const FRAMEWORK_REF = "#/components/schemas/HttpApiDecodeError"
const FRAMEWORK_DESCRIPTION = "The request did not match the expected schema"

type Json = Record<string, any>

const withoutFrameworkError = (responses: Json): Json => {
  const out: Json = {}
  for (const [status, response] of Object.entries(responses)) {
    const content = response?.content?.["application/json"]
    const schema = content?.schema
    if (schema?.$ref === FRAMEWORK_REF) continue
    if (Array.isArray(schema?.anyOf)) {
      const members = schema.anyOf.filter((member: Json) => member.$ref !== FRAMEWORK_REF)
      content.schema = members.length === 1 ? members[0] : { ...schema, anyOf: members }
    }
    out[status] = response.description === FRAMEWORK_DESCRIPTION
      ? { ...response, description: "The request is invalid; `error` says how." }
      : response
  }
  return out
}

const SECURITY_SCHEMES: Json = {
  serviceToken: {
    type: "oauth2",
    description: "An access token from POST /oauth/token, sent as `Authorization: Bearer <token>` (RFC 6750). " +
      "It is valid only for the service it was issued for (its `aud`).",
    flows: {
      clientCredentials: { tokenUrl: "/oauth/token", scopes: { "service:call": "Call the hosted service the token is for." } }
    }
  },
  clientSecretBasic: {
    type: "http",
    scheme: "basic",
    description: "client_secret_basic (RFC 6749 §2.3.1): Basic base64(urlencode(client_id):urlencode(client_secret)). " +
      "The alternative, client_secret_post, sends client_id and client_secret in the form."
  }
}

/** Per operation: its security requirement (`{}` = none needed) and whether its body may be left out. */
const OPERATIONS: Record<string, { readonly security?: ReadonlyArray<Json>; readonly optionalBody?: true }> = {
  // No scheme is required, so a generated example sends the form alone (client_secret_post): with
  // clientSecretBasic listed, Scalar picked it and added a Basic header beside the form's client_id,
  // which the server refuses. client_secret_basic is described by its body schema (below).
  "token.issueToken": { security: [{}] },
  // A service with auth_type none is open; one with oauth needs a token for it.
  "service.callService": { security: [{ serviceToken: ["service:call"] }, {}] },
  "profiles.putProfile": { optionalBody: true },
  "profiles.putEnvironment": { optionalBody: true },
  "services.createCredential": { optionalBody: true }
}

const header = (description: string, example?: string): Json => ({
  description,
  schema: example === undefined ? { type: "string" } : { type: "string", example }
})
const NO_STORE_HEADERS: Json = {
  "Cache-Control": header("Always no-store: token answers are never cached.", "no-store"),
  Pragma: header("Always no-cache.", "no-cache")
}
const RETRY_AFTER: Json = { "Retry-After": header("Seconds to wait before retrying.", "1") }

const DEPRECATED_KEY_HEADERS: Json = {
  Deprecation: header(
    "Only on a key credential made here (deprecated): when this use was deprecated (RFC 9745).",
    KEY_ON_CREDENTIALS_DEPRECATION
  ),
  Sunset: header(
    "Only on a key credential made here: the date after which this use may stop working (RFC 8594).",
    KEY_ON_CREDENTIALS_SUNSET
  ),
  Link: header(
    "Only on a key credential made here: the operation to use instead.",
    "</admin/profiles/acme/environments/production/services/0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10/key-credentials>; rel=\"successor-version\""
  )
}

/**
 * POST …/credentials still decodes a key body (deprecated, answered with the headers above), but
 * documents secret credentials only, so that a generated client's request and answer types stay
 * those of a secret credential. Both new-credential answers are named components, as they were
 * when they shared an operation.
 */
const CREDENTIALS_PATH = "/admin/profiles/{profile}/environments/{environment}/services/{uuid}/credentials"
const documentCredentialOperations = (spec: Json): void => {
  const schemas: Json = spec.components.schemas
  const name = (path: string, component: string) => {
    const content = spec.paths?.[path]?.post?.responses?.["201"]?.content?.["application/json"]
    if (content?.schema === undefined || content.schema.$ref !== undefined) return
    schemas[component] = content.schema
    content.schema = { $ref: `#/components/schemas/${component}` }
  }
  name(CREDENTIALS_PATH, "NewCredential")
  name(CREDENTIALS_PATH.replace(/credentials$/, "key-credentials"), "NewKeyCredential")
  const body = spec.paths?.[CREDENTIALS_PATH]?.post?.requestBody?.content?.["application/json"]
  if (body !== undefined) body.schema = { $ref: "#/components/schemas/CredentialInput" }
}

const DEPRECATED_SAVE_HEADERS: Json = {
  Deprecation: header(
    "Only when a change was add_credential with public_key (deprecated): when that use was deprecated (RFC 9745).",
    KEY_ON_CREDENTIALS_DEPRECATION
  ),
  Sunset: header(
    "Only when a change was add_credential with public_key: the date after which that use may stop working (RFC 8594).",
    KEY_ON_CREDENTIALS_SUNSET
  )
}

/**
 * A save still decodes add_credential with public_key and answers that key credential in `created`
 * (deprecated, with the headers above), but documents `created` as secret credentials only, so
 * that a generated client reads `created[i].client_secret` without narrowing; add_key_credential's
 * are answered in `created_key_credentials`.
 */
const documentSaveOperation = (spec: Json): void => {
  const schemas: Json = spec.components.schemas
  const created = schemas.SaveProfileResult?.properties?.created
  if (created !== undefined) created.items = { $ref: "#/components/schemas/CreatedSecretCredential" }
  const publicKey = schemas.AddCredentialChange?.properties?.public_key
  if (publicKey !== undefined) publicKey.deprecated = true
}

/** The headers each answer carries, by path, operation and status. */
const responseHeaders = (path: string, operationId: string, status: string): Json => ({
  ...(status === "429" || status === "503" ? RETRY_AFTER : {}),
  ...(operationId === "token.issueToken" ? NO_STORE_HEADERS : {}),
  ...(operationId === "token.issueToken" && status === "401"
    ? { "WWW-Authenticate": header("Basic realm=\"oauth\", when the client authenticated with HTTP Basic.") }
    : {}),
  ...(operationId === "service.callService" && ["400", "401", "403"].includes(status)
    ? {
      "WWW-Authenticate": header(
        "The Bearer challenge (RFC 6750 §3), on failures of the token.",
        "Bearer realm=\"service\", error=\"invalid_token\""
      )
    }
    : {}),
  ...(operationId === "services.createCredential" && status === "201" ? DEPRECATED_KEY_HEADERS : {}),
  ...(operationId === "profiles.saveProfile" && status === "200" ? DEPRECATED_SAVE_HEADERS : {}),
  ...(path.startsWith("/admin/") && status === "401"
    ? { "WWW-Authenticate": header("The Bearer challenge (RFC 6750 §3): send the admin token.", "Bearer realm=\"admin\"") }
    : {})
})

/**
 * The token request in its two client authentications, one schema each, so that a generated
 * example sends the credentials exactly once (both at once is 400 invalid_request): with
 * client_secret_post they are required form fields; with client_secret_basic they are in the
 * `Authorization: Basic` header (`clientSecretBasic`) and not in the form at all.
 */
const describeClientAuthentication = (spec: Json): void => {
  const schemas = spec.components?.schemas ?? {}
  const request: Json | undefined = schemas.TokenRequest
  if (request === undefined) return
  const { client_assertion, client_assertion_type, client_id, client_secret, ...others } = request.properties
  schemas.TokenRequestPrivateKeyJwt = {
    ...request,
    description: "private_key_jwt (RFC 7523), for a key credential: a client assertion in place of a secret; " +
      "client_id optional (when sent, the assertion's own).",
    required: [...request.required.slice(0, 1), "client_assertion_type", "client_assertion", ...request.required.slice(1)],
    properties: {
      ...others,
      client_id: { ...client_id, description: "Optional: the assertion's iss and sub." },
      client_assertion_type,
      client_assertion
    }
  }
  schemas.TokenRequestClientSecretPost = {
    ...request,
    description: "client_secret_post: the client id and secret in the form, and no Authorization header.",
    required: [...request.required.slice(0, 1), "client_id", "client_secret", ...request.required.slice(1)],
    properties: {
      ...others,
      client_id: { ...client_id, description: "Client id (starts with svc_)." },
      client_secret: { ...client_secret, description: "Client secret." }
    }
  }
  schemas.TokenRequestClientSecretBasic = {
    ...request,
    description: "client_secret_basic: the client id and secret in `Authorization: Basic` (security scheme " +
      "clientSecretBasic), never also in the form.",
    properties: others
  }
  delete schemas.TokenRequest
  const body = spec.paths?.["/oauth/token"]?.post?.requestBody?.content?.["application/x-www-form-urlencoded"]
  if (body === undefined) return
  body.schema = {
    oneOf: [
      { $ref: "#/components/schemas/TokenRequestClientSecretPost" },
      { $ref: "#/components/schemas/TokenRequestClientSecretBasic" },
      { $ref: "#/components/schemas/TokenRequestPrivateKeyJwt" }
    ]
  }
  const target = { profile: "acme", environment: "production", service_uuid: "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10" }
  body.examples = {
    client_secret_post: {
      summary: "client_secret_post (no Authorization header; placeholders: use your own ids and secret)",
      value: { grant_type: "client_credentials", client_id: "svc_0123456789abcdef0123456789abcdef", client_secret: "…", ...target }
    },
    client_secret_basic: {
      summary: "client_secret_basic (with Authorization: Basic; placeholders: use your own ids)",
      value: { grant_type: "client_credentials", ...target }
    }
  }
}

export const openApiSpec = (): Json => {
  const spec = structuredClone(OpenApi.fromApi(Api)) as Json
  spec.servers = [{ url: "http://localhost:3000", description: "npm start on this machine (ISSUER is the public URL)" }]
  spec.components = { ...spec.components, securitySchemes: { ...spec.components?.securitySchemes, ...SECURITY_SCHEMES } }
  for (const [path, operations] of Object.entries(spec.paths ?? {}) as Array<[string, Json]>) {
    for (const operation of Object.values(operations) as Array<Json>) {
      if (operation?.responses === undefined) continue
      operation.responses = withoutFrameworkError(operation.responses)
      for (const [status, response] of Object.entries(operation.responses) as Array<[string, Json]>) {
        const headers = responseHeaders(path, operation.operationId, status)
        if (Object.keys(headers).length > 0) response.headers = { ...response.headers, ...headers }
      }
      const declared = OPERATIONS[operation.operationId]
      if (declared?.security !== undefined) operation.security = declared.security
      if (declared?.optionalBody === true && operation.requestBody !== undefined) operation.requestBody.required = false
    }
  }
  for (const name of FRAMEWORK_SCHEMAS) delete spec.components?.schemas?.[name]
  describeClientAuthentication(spec)
  documentCredentialOperations(spec)
  discriminateUnions(spec)
  documentSaveOperation(spec)
  return spec
}

export const openApiYaml = (): string => toYaml(openApiSpec())
