/**
 * The OpenAPI document of `Api`, as served and as committed in `openapi.yaml`.
 *
 * HttpApi documents its own decode error (400 `HttpApiDecodeError`) on every endpoint. Our handlers
 * never let it reach a client (every 400 is the contract's `{"error","error_description"}` body),
 * so it is removed here: from unions where it sits beside our errors, and as a whole response
 * where it is the only 400.
 */
import { OpenApi } from "@effect/platform"
import { Api } from "./Api.js"
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

export const openApiSpec = (): Json => {
  const spec = structuredClone(OpenApi.fromApi(Api)) as Json
  for (const operations of Object.values(spec.paths ?? {}) as Array<Json>) {
    for (const operation of Object.values(operations)) {
      if (operation?.responses !== undefined) operation.responses = withoutFrameworkError(operation.responses)
    }
  }
  for (const name of FRAMEWORK_SCHEMAS) delete spec.components?.schemas?.[name]
  return spec
}

export const openApiYaml = (): string => toYaml(openApiSpec())
