/**
 * Discriminated unions in the OpenAPI document.
 *
 * Effect's JSON Schema renders a `Schema.Union` as a bare `anyOf`, which generators turn into a union
 * type they cannot narrow. Wherever the members of a union are objects that share a required member
 * holding one string each (`type` of a handler, `op` of a change, `error` of a refusal,
 * `token_endpoint_auth_method` of a new credential), this pass declares that member the union's
 * `discriminator` and makes it a `oneOf` (the members exclude each other by that member). Members
 * written inline are moved to named components first, since a discriminator's mapping names its
 * members by reference.
 *
 * Only the document changes: the schemas, and so every body on the wire, stay as they are. Unions
 * left alone, on purpose: a value or `null`, a JWK or a PEM string, the header forms, audit detail
 * values (not objects), the introspection answer (RFC 7662 tells its variants by the boolean
 * `active`, which OpenAPI cannot use as a discriminator) and the credential request body (its
 * variants have no member in common; making one required would refuse requests valid today).
 */

type Json = Record<string, any>

const REF_PREFIX = "#/components/schemas/"

/** Names for members written inline, by where their union sits and their discriminating value. */
const INLINE_NAMES: Record<string, Record<string, string>> = {
  CreatedCredential: { client_secret_basic: "CreatedSecretCredential", private_key_jwt: "CreatedKeyCredential" },
  ServiceHandler: { echo: "EchoHandler", proxy: "ProxyHandler", code: "CodeHandler" },
  ServiceHandlerInput: { echo: "EchoHandlerInput", proxy: "ProxyHandlerInput", code: "CodeHandlerInput" },
  ProfileChange: {
    add_credential: "AddCredentialChange",
    add_key_credential: "AddKeyCredentialChange",
    remove_credential: "RemoveCredentialChange"
  }
}

const pascal = (text: string): string =>
  text.split(/[^A-Za-z0-9]+/).filter(Boolean).map((word) => word[0]!.toUpperCase() + word.slice(1)).join("")

/** The single string a member's property holds, when its schema allows exactly one. */
const singleString = (property: Json | undefined): string | undefined => {
  if (property === undefined) return undefined
  if (typeof property.const === "string") return property.const
  if (property.type === "string" && Array.isArray(property.enum) && property.enum.length === 1) {
    return typeof property.enum[0] === "string" ? property.enum[0] : undefined
  }
  return undefined
}

/** The property every member requires with a distinct single string, and each member's value. */
const discriminatorOf = (members: ReadonlyArray<Json>): { name: string; values: Array<string> } | undefined => {
  if (members.length < 2 || members.some((member) => member.type !== "object")) return undefined
  const candidates = (members[0]!.required ?? []) as Array<string>
  for (const name of candidates) {
    const values = members.map((member) => (member.required ?? []).includes(name) ? singleString(member.properties?.[name]) : undefined)
    if (values.every((value): value is string => value !== undefined) && new Set(values).size === values.length) {
      return { name, values }
    }
  }
  return undefined
}

/**
 * Rewrites `holder[key]` (an `anyOf`) as a discriminated `oneOf` when its members allow it; `where`
 * names the union for the names of its inline members.
 */
const discriminate = (spec: Json, holder: Json, key: string, where: string): void => {
  const union: Json = holder[key]
  const schemas: Json = spec.components.schemas
  const resolved = (union.anyOf as Array<Json>).map((member) =>
    typeof member.$ref === "string" && member.$ref.startsWith(REF_PREFIX) ? schemas[member.$ref.slice(REF_PREFIX.length)] : member
  )
  if (resolved.some((member) => member === undefined)) return
  const found = discriminatorOf(resolved)
  if (found === undefined) return
  const refs = (union.anyOf as Array<Json>).map((member, index) => {
    if (member.$ref !== undefined) return member.$ref as string
    const value = found.values[index]!
    const name = INLINE_NAMES[where]?.[value] ?? `${pascal(where)}${pascal(value)}`
    if (schemas[name] !== undefined) throw new Error(`OpenAPI: the union member name ${name} is taken`)
    schemas[name] = member
    return `${REF_PREFIX}${name}`
  })
  const { anyOf: _, ...rest } = union
  holder[key] = {
    ...rest,
    oneOf: refs.map(($ref) => ({ $ref })),
    discriminator: {
      propertyName: found.name,
      mapping: Object.fromEntries(found.values.map((value, index) => [value, refs[index]!]))
    }
  }
}

/** Every `anyOf` under `node`, depth first, with its holder, key and the name of where it sits. */
const visit = (node: unknown, where: string, found: (holder: Json, key: string, where: string) => void): void => {
  if (node === null || typeof node !== "object") return
  for (const [key, child] of Object.entries(node as Json)) {
    visit(child, where, found)
    if (child !== null && typeof child === "object" && Array.isArray((child as Json).anyOf)) found(node as Json, key, where)
  }
}

/** Declares a discriminator on every union of objects told apart by one shared member (see above). */
export const discriminateUnions = (spec: Json): void => {
  const schemas: Json | undefined = spec.components?.schemas
  if (schemas === undefined) return
  for (const name of Object.keys(schemas)) {
    const holder = { [name]: schemas[name] }
    visit(holder, name, (parent, key, where) => discriminate(spec, parent, key, where))
    schemas[name] = holder[name]
  }
  for (const operations of Object.values(spec.paths ?? {}) as Array<Json>) {
    for (const operation of Object.values(operations) as Array<Json>) {
      for (const [status, response] of Object.entries((operation?.responses ?? {}) as Json)) {
        visit(response, `${operation.operationId} ${status}`, (parent, key, where) => discriminate(spec, parent, key, where))
      }
      if (operation?.requestBody !== undefined) {
        visit(operation.requestBody, `${operation.operationId} body`, (parent, key, where) => discriminate(spec, parent, key, where))
      }
    }
  }
}
