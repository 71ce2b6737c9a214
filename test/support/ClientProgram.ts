/**
 * An integrator's program beside the types generated from a document, compiled as they would: a
 * folder with the program, `schema.d.ts` and a strict tsconfig, checked by the package's tsc. Used by
 * the tests that compile programs against generated clients.
 */
import { execFile } from "node:child_process"
import { copyFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const ROOT = fileURLToPath(new URL("../../", import.meta.url))
const run = promisify(execFile)

/** Writes `source` into `dir` as `program` with a strict tsconfig that compiles it with `schema.d.ts`. */
export const writeClientProgram = (dir: string, source: string, program: string): void => {
  copyFileSync(source, join(dir, program))
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ["node"],
        typeRoots: [join(ROOT, "node_modules/@types")]
      },
      files: [program, "schema.d.ts"]
    })
  )
}

/** tsc's complaints about the program in `dir`, or "" when it compiles. */
export const compileClientProgram = (dir: string): Promise<string> =>
  run(join(ROOT, "node_modules/.bin/tsc"), ["-p", dir]).then(
    () => "",
    (error: { stdout?: string }) => error.stdout ?? String(error)
  )
