/**
 * The integrator's view of a change: types generated from both documents by openapi-typescript, and
 * a program, compiled by tsc, that hands every operation of the released document what the new one
 * accepts and answers. It fails where code written against the release would stop compiling: a
 * request member made required or narrowed (the old request no longer fits the new type), an
 * answer whose shape changed or widened (the new answer no longer fits the old type: a new union
 * member, a new enum value, a changed type), a removed path, method, status or parameter.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import openapiTS, { astToString } from "openapi-typescript"
import ts from "typescript"
import YAML from "yaml"

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const

export interface TypeBreak {
  readonly operation: string
  readonly message: string
}

/** Generates `paths` types for a document (YAML text), as an integrator's build would. */
export const generatedTypes = async (document: string): Promise<string> => astToString(await openapiTS(document))

const checkProgram = (base: Record<string, any>): { readonly text: string; readonly operations: Array<string> } => {
  const lines = [
    "import type { paths as Released } from \"./released.js\"",
    "import type { paths as Current } from \"./current.js\"",
    "declare function from<T>(): T;"
  ]
  const operations: Array<string> = []
  for (const [path, item] of Object.entries(base.paths ?? {}) as Array<[string, Record<string, unknown>]>) {
    for (const method of METHODS) {
      if (item?.[method] === undefined) continue
      const operation = `${method.toUpperCase()} ${path}`
      const released = `Released[${JSON.stringify(path)}][${JSON.stringify(method)}]`
      const current = `Current[${JSON.stringify(path)}][${JSON.stringify(method)}]`
      // One operation a line, so that tsc's line number names the operation.
      operations.push(operation)
      lines.push(
        `{ const parameters: ${current}["parameters"] = from<${released}["parameters"]>(); ` +
          `const body: ${current}["requestBody"] = from<${released}["requestBody"]>(); ` +
          `const responses: ${released}["responses"] = from<${current}["responses"]>(); ` +
          `void parameters; void body; void responses }`
      )
    }
  }
  return { text: `${lines.join("\n")}\n`, operations }
}

/** The breaks an integrator's compiler would meet going from `releasedYaml` to `currentYaml`. */
export const typeBreaks = async (releasedYaml: string, currentYaml: string): Promise<Array<TypeBreak>> => {
  const dir = mkdtempSync(join(tmpdir(), "api-contract-"))
  try {
    writeFileSync(join(dir, "released.d.ts"), await generatedTypes(releasedYaml))
    writeFileSync(join(dir, "current.d.ts"), await generatedTypes(currentYaml))
    const { text, operations } = checkProgram(YAML.parse(releasedYaml))
    writeFileSync(join(dir, "check.ts"), text)
    const program = ts.createProgram([join(dir, "check.ts")], {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: []
    })
    const found = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const line = diagnostic.file !== undefined && diagnostic.start !== undefined
        ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line
        : -1
      const inCheck = diagnostic.file?.fileName.endsWith("check.ts") === true
      return {
        operation: inCheck && line >= 3 ? operations[line - 3] ?? "(document)" : "(generated types)",
        message: ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")
      }
    })
    // A removed path fails each of its operation's three checks alike: told once.
    return found.filter((item, index) =>
      found.findIndex((other) => other.operation === item.operation && other.message === item.message) === index
    )
  } finally {
    if (process.env.API_CONTRACT_KEEP === undefined) rmSync(dir, { recursive: true, force: true })
    else console.log(dir)
  }
}
