/**
 * Every TypeScript block of the README and of docs/integrators.md compiles as written against this
 * checkout: the blocks are taken from those pages, written to a folder inside the repository and
 * type-checked as one program with the project's compiler settings. `rootDirs` lets a block's
 * `./src/...` imports resolve as they would from the repository's root, where a reader pastes them.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { afterAll, describe, expect, it } from "vitest"

const ROOT = fileURLToPath(new URL("../", import.meta.url))

interface Block {
  readonly code: string
  /** The page, and the line of the block's first line of code in it. */
  readonly page: string
  readonly line: number
}

/** The pages whose TypeScript blocks a reader pastes. */
const PAGES = ["README.md", "docs/integrators.md"]

const readmeBlocks = (): ReadonlyArray<Block> =>
  PAGES.flatMap((page) => {
    const text = readFileSync(join(ROOT, page), "utf8")
    return [...text.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((match) => ({
      code: match[1]!,
      page,
      line: text.slice(0, match.index).split("\n").length + 1
    }))
  })

const dir = mkdtempSync(join(ROOT, ".readme-blocks-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("README.md and docs/integrators.md", () => {
  it("every ```ts block compiles against src/ as written", () => {
    const blocks = readmeBlocks()
    // The embedding example (with a handler) and the test example at least.
    expect(blocks.length).toBeGreaterThanOrEqual(2)
    const files = blocks.map((block, index) => {
      const file = join(dir, `block-${index + 1}.ts`)
      writeFileSync(file, block.code)
      return file
    })
    const { config } = ts.readConfigFile(join(ROOT, "tsconfig.json"), ts.sys.readFile)
    const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT)
    const program = ts.createProgram(files, {
      ...options,
      noEmit: true,
      rootDirs: [ROOT, dir],
      // A snippet shows a value without always using it.
      noUnusedLocals: false
    })
    const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")
      if (diagnostic.file === undefined || diagnostic.start === undefined) return message
      const index = files.indexOf(diagnostic.file.fileName)
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start)
      const where = index < 0
        ? `${diagnostic.file.fileName}:${line + 1}`
        : `${blocks[index]!.page} line ${blocks[index]!.line + line} (block ${index + 1})`
      return `${where}: ${message}`
    })
    expect(problems).toEqual([])
  }, 180_000)
})
