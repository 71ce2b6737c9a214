/**
 * `npm run check:api`: is `openapi.yaml` an additive change of the last release's document?
 *
 * The release is the newest `api/releases/<version>/openapi.yaml` not above package.json's version
 * (docs/releases.md). Three checks, all must pass: Optic's breaking-change rules, the
 * integrator's compiler (types generated from both documents by openapi-typescript, see
 * `api-contract/TypeCompat.ts`), and the request constraints types cannot carry
 * (`api-contract/RequestConstraints.ts`). A break fails unless package.json's major version is above the
 * release's: that is how a break is declared.
 *
 *   tsx scripts/check-api.ts [--released FILE] [--current FILE] [--version X.Y.Z]
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import YAML from "yaml"
import { opticDiff } from "./api-contract/OpticDiff.js"
import { constraintBreaks } from "./api-contract/RequestConstraints.js"
import { baselineFor, packageVersion, parseVersion } from "./api-contract/Releases.js"
import { typeBreaks } from "./api-contract/TypeCompat.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))

const { values } = parseArgs({
  options: { released: { type: "string" }, current: { type: "string" }, version: { type: "string" } }
})

const version = values.version === undefined ? packageVersion(ROOT) : parseVersion(values.version)
if (version === undefined) throw new Error(`--version ${values.version} is not MAJOR.MINOR.PATCH`)
const baseline = values.released === undefined ? baselineFor(ROOT, version) : undefined
const releasedFile = values.released === undefined ? baseline?.file : resolve(values.released)
if (releasedFile === undefined) {
  console.error(`check:api: no released document at or below ${version.text} in api/releases/`)
  process.exit(1)
}
const currentFile = resolve(values.current ?? `${ROOT}/openapi.yaml`)
const releasedLabel = baseline === undefined ? releasedFile : `release ${baseline.version.text}`
const majorRaised = baseline !== undefined && version.major > baseline.version.major

console.log(`check:api: ${currentFile} against ${releasedLabel} (package ${version.text})`)
const optic = await opticDiff(ROOT, releasedFile, currentFile)
const types = await typeBreaks(readFileSync(releasedFile, "utf8"), readFileSync(currentFile, "utf8"))
const constraints = constraintBreaks(YAML.parse(readFileSync(releasedFile, "utf8")), YAML.parse(readFileSync(currentFile, "utf8")))

for (const finding of optic.findings) console.log(`  optic: ${finding}`)
for (const found of types) console.log(`  types: ${found.operation}: ${found.message.split("\n").slice(0, 6).join(" / ")}`)
for (const found of constraints) console.log(`  constraints: ${found.operation}: ${found.message}`)

const count = optic.findings.length + types.length + constraints.length
const breaking = optic.breaking || count > 0
if (!breaking) {
  console.log("check:api: additive, no breaking change")
} else if (majorRaised) {
  console.log(`check:api: breaking changes allowed: ${version.text} raises the major version of ${baseline!.version.text}`)
} else {
  console.error(
    `check:api: ${count} breaking change(s) against ${releasedLabel}. ` +
      "Make the change additive, or declare the break by raising package.json's major version (docs/releases.md)."
  )
  process.exit(1)
}
