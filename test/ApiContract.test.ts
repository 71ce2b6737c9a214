/**
 * `npm run check:api` (scripts/check-api.ts): the current document passes against the last kept
 * release; copies of it with a deliberately breaking edit fail, each naming what broke; a break
 * passes once declared with a raised major version. The edits are made on the document's data, as a
 * schema change would make them.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import YAML from "yaml"
import { opticDiff } from "../scripts/api-contract/OpticDiff.js"
import { baselineFor, packageVersion } from "../scripts/api-contract/Releases.js"
import { constraintBreaks } from "../scripts/api-contract/RequestConstraints.js"
import { typeBreaks } from "../scripts/api-contract/TypeCompat.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const run = promisify(execFile)
const workDir = mkdtempSync(join(tmpdir(), "api-contract-test-"))
const document = (): Record<string, any> => YAML.parse(readFileSync(join(ROOT, "openapi.yaml"), "utf8"))

/** Runs the check on a copy of the document edited by `edit`; its exit code and output. */
const check = async (edit: (spec: Record<string, any>) => void, args: Array<string> = []) => {
  const spec = document()
  edit(spec)
  const file = join(workDir, `openapi-${Math.random().toString(36).slice(2)}.yaml`)
  writeFileSync(file, YAML.stringify(spec))
  return run(join(ROOT, "node_modules/.bin/tsx"), [join(ROOT, "scripts/check-api.ts"), "--current", file, ...args], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024
  }).then(
    ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: error.code ?? -1,
      output: `${error.stdout ?? ""}${error.stderr ?? ""}`
    })
  )
}

/** Optic's and the compiler's findings for the last release against a copy edited by `edit`. */
const compare = async (edit: (spec: Record<string, any>) => void) => {
  const released = baselineFor(ROOT, packageVersion(ROOT))!.file
  const spec = document()
  edit(spec)
  const file = join(workDir, `openapi-${Math.random().toString(36).slice(2)}.yaml`)
  writeFileSync(file, YAML.stringify(spec))
  const [optic, types] = await Promise.all([
    opticDiff(ROOT, released, file),
    typeBreaks(readFileSync(released, "utf8"), YAML.stringify(spec))
  ])
  return { optic, types, constraints: constraintBreaks(YAML.parse(readFileSync(released, "utf8")), spec) }
}

const CREDENTIALS = "/admin/profiles/{profile}/environments/{environment}/services/{uuid}/credentials"
const without = (list: Array<string>, item: string) => list.filter((entry) => entry !== item)

describe("npm run check:api", () => {
  afterAll(() => rmSync(workDir, { recursive: true, force: true }))

  it("checks against the kept release of package.json's version", () => {
    const version = packageVersion(ROOT)
    expect(baselineFor(ROOT, version)?.version.text).toBe(version.text)
  })

  it("passes on the current document", async () => {
    const result = await check(() => {})
    expect(result.output).toContain("additive, no breaking change")
    expect(result.code).toBe(0)
  }, 180_000)

  it("passes on an additive change: a new optional answer member", async () => {
    const { optic, types, constraints } = await compare((spec) => {
      spec.components.schemas.SigningKey.properties.note = { type: "string" }
    })
    expect(optic.findings).toEqual([])
    expect(optic.breaking).toBe(false)
    expect(types).toEqual([])
    expect(constraints).toEqual([])
  }, 180_000)

  it("finds each deliberately breaking edit, by rule or by operation", async () => {
    const { optic, types, constraints } = await compare((spec) => {
      delete spec.paths["/admin/tokens/{name}"]
      spec.components.schemas.ServiceInput.properties.name.maxLength = 3
      const key = spec.components.schemas.SigningKey
      delete key.properties.kid
      key.required = without(key.required, "kid")
      spec.components.schemas.AdminRole.enum = without(spec.components.schemas.AdminRole.enum, "viewer")
      spec.components.schemas.NewAdminToken.required.push("profiles")
      spec.components.schemas.AuditEventPage.properties.next = { type: "integer" }
      const answer = spec.paths[CREDENTIALS].post.responses["201"].content["application/json"]
      answer.schema = { anyOf: [answer.schema, { type: "object", required: ["key_id"], properties: { key_id: { type: "string" } } }] }
    })
    const found = [...optic.findings, ...[...types, ...constraints].map((item) => `${item.operation}: ${item.message}`)].join("\n")
    expect(optic.breaking).toBe(true)
    // A removed path, a removed answer member, a removed enum value (Optic's rules).
    expect(found).toContain("cannot remove an operation")
    expect(found).toContain("cannot remove response property 'kid'")
    expect(found).toContain("cannot remove enum option 'viewer'")
    // A request member made required, a narrowed type, a changed answer shape (the compiler's view).
    expect(found).toMatch(/^POST \/admin\/tokens: /m)
    expect(found).toMatch(/^GET \/admin\/audit: /m)
    expect(found).toMatch(new RegExp(`^POST ${CREDENTIALS.replace(/[{}/]/g, "\\$&")}: `, "m"))
    expect(found).toMatch(/^DELETE \/admin\/tokens\/\{name\}: /m)
    // A bound types cannot carry, tightened on a request member.
    expect(found).toMatch(
      /^POST \/admin\/profiles\/\{profile\}\/environments\/\{environment\}\/services: body application\/json\.name: maxLength \S+ → 3$/m
    )
  }, 240_000)

  it("fails, exit 1, on a breaking edit: client_secret removed from the secret credential", async () => {
    const result = await check((spec) => {
      const secret = spec.components.schemas.NewCredential
      delete secret.properties.client_secret
      secret.required = without(secret.required, "client_secret")
    })
    expect(result.code, result.output).toBe(1)
    expect(result.output).toContain("client_secret")
    expect(result.output).toContain("raising package.json's major version")
  }, 180_000)

  it("passes a break declared by a raised major version, and says so", async () => {
    const next = `${packageVersion(ROOT).major + 1}.0.0`
    const result = await check((spec) => delete spec.paths["/admin/keys"], ["--version", next])
    expect(result.code, result.output).toBe(0)
    expect(result.output).toContain(`breaking changes allowed: ${next} raises the major version`)
  }, 180_000)
})
