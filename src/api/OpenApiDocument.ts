/**
 * The OpenAPI document of `Api`, as served and as committed in `openapi.yaml`.
 *
 * HttpApi documents its own decode error on every endpoint; our handlers never let it reach a
 * client (every 400 is the contract's `{"error","error_description"}` body), so it is removed here.
 */
import { OpenApi } from "@effect/platform"
import { Api } from "./Api.js"
import { toYaml } from "./Yaml.js"

const FRAMEWORK_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const withoutFrameworkErrors = (value: unknown): unknown => {
  if (Array.isArray(value)) {
    return value
      .filter((item) => !(isRecord(item) && typeof item.$ref === "string" && FRAMEWORK_SCHEMAS.some((name) => item.$ref === `#/components/schemas/${name}`)))
      .map(withoutFrameworkErrors)
  }
  if (!isRecord(value)) return value
  const out: Record<string, unknown> = {}
  for (const [key, child] of Object.entries(value)) {
    const cleaned = withoutFrameworkErrors(child)
    // A union left with one member is that member.
    if (isRecord(cleaned) && Array.isArray(cleaned.anyOf) && cleaned.anyOf.length === 1) {
      out[key] = cleaned.anyOf[0]
    } else {
      out[key] = cleaned
    }
  }
  return out
}

const isRecord = (value: unknown): value is Record<string, any> => typeof value === "object" && value !== null

export const openApiSpec = (): Record<string, any> => {
  const spec = withoutFrameworkErrors(OpenApi.fromApi(Api)) as Record<string, any>
  for (const name of FRAMEWORK_SCHEMAS) delete spec.components?.schemas?.[name]
  return spec
}

export const openApiYaml = (): string => toYaml(openApiSpec())
