/**
 * What neither Optic's rules nor generated types see: a request that the released document allowed
 * and the new one refuses by a constraint, not by its type. For every operation of the release, its
 * request bodies and parameters are walked in both documents along the same members and items, and
 * a bound that appeared or tightened (`maxLength`, `minimum`, `maxItems`, …), a `pattern` that
 * appeared or changed, or extra members newly refused (`additionalProperties: false`) is a break.
 */
type Json = Record<string, any>

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const
const UPPER = ["maxLength", "maxItems", "maximum", "exclusiveMaximum", "maxProperties"] as const
const LOWER = ["minLength", "minItems", "minimum", "exclusiveMinimum", "minProperties"] as const

export interface ConstraintBreak {
  readonly operation: string
  readonly message: string
}

const resolve = (spec: Json, schema: Json | undefined, depth = 0): Json | undefined => {
  if (schema === undefined || depth > 20) return schema
  if (typeof schema.$ref !== "string") return schema
  const target = schema.$ref.replace(/^#\//, "").split("/").reduce((node: any, key: string) => node?.[key], spec)
  return resolve(spec, target, depth + 1)
}

const compare = (
  released: Json,
  current: Json,
  before: Json | undefined,
  after: Json | undefined,
  where: string,
  found: Array<string>,
  depth = 0
): void => {
  const old = resolve(released, before)
  const now = resolve(current, after)
  if (old === undefined || now === undefined || depth > 12) return
  for (const key of UPPER) {
    if (typeof now[key] === "number" && !(typeof old[key] === "number" && now[key] >= old[key])) {
      found.push(`${where}: ${key} ${old[key] ?? "none"} → ${now[key]}`)
    }
  }
  for (const key of LOWER) {
    if (typeof now[key] === "number" && !(typeof old[key] === "number" && now[key] <= old[key])) {
      found.push(`${where}: ${key} ${old[key] ?? "none"} → ${now[key]}`)
    }
  }
  if (typeof now.pattern === "string" && now.pattern !== old.pattern) {
    found.push(`${where}: pattern ${old.pattern ?? "none"} → ${now.pattern}`)
  }
  if (now.additionalProperties === false && old.additionalProperties !== false) {
    found.push(`${where}: additional members refused`)
  }
  for (const [name, property] of Object.entries((old.properties ?? {}) as Json)) {
    compare(released, current, property, now.properties?.[name], `${where}.${name}`, found, depth + 1)
  }
  if (old.items !== undefined) compare(released, current, old.items, now.items, `${where}[]`, found, depth + 1)
}

/** The constraints that refuse, in `current`, requests `released` allowed. */
export const constraintBreaks = (released: Json, current: Json): Array<ConstraintBreak> => {
  const breaks: Array<ConstraintBreak> = []
  for (const [path, item] of Object.entries((released.paths ?? {}) as Json)) {
    for (const method of METHODS) {
      const before: Json | undefined = item?.[method]
      const after: Json | undefined = current.paths?.[path]?.[method]
      if (before === undefined || after === undefined) continue
      const found: Array<string> = []
      const oldBody = resolve(released, before.requestBody)?.content ?? {}
      const newBody = resolve(current, after.requestBody)?.content ?? {}
      for (const [media, content] of Object.entries(oldBody as Json)) {
        compare(released, current, content?.schema, newBody[media]?.schema, `body ${media}`, found)
      }
      for (const parameter of [...(item.parameters ?? []), ...(before.parameters ?? [])] as Array<Json>) {
        const old = resolve(released, parameter)
        const now = [...(current.paths[path].parameters ?? []), ...(after.parameters ?? [])]
          .map((candidate: Json) => resolve(current, candidate))
          .find((candidate) => candidate?.name === old?.name && candidate?.in === old?.in)
        if (old !== undefined && now !== undefined) {
          compare(released, current, old.schema, now.schema, `${old.in} parameter ${old.name}`, found)
        }
      }
      for (const message of found) breaks.push({ operation: `${method.toUpperCase()} ${path}`, message })
    }
  }
  return breaks
}
