/**
 * PGlite's WebAssembly (9 MB) compiled, and its file-system bundle read, while the rest of the
 * server loads. A start-up profile on an existing data directory showed the two in sequence: parsing
 * the server's modules on the main thread, then PGlite reading and compiling its WebAssembly, itself
 * on V8's background threads, with the main thread idle meanwhile. `npm start`'s entry
 * (`src/start.ts`) begins both first, so the compile runs beside the module parsing; opening the
 * database (`PgliteClient`, through `PgliteWarmed`, which ServerMain.ts provides) then takes what is ready.
 * Where nothing was warmed (tests, the CLI) or warming failed, PGlite loads its files itself.
 *
 * This module imports nothing but Node's: it runs before the rest of the bundle is even parsed.
 */
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

/** PGlite's `dist/` folder (`import.meta.resolve` is not there under every loader, vitest's included). */
export const pgliteDist = (): string => dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"))

/** What readFile gives is a Buffer on a plain ArrayBuffer, never a shared one. */
const plain = (bytes: Buffer) => bytes as Buffer<ArrayBuffer>

/** PGlite's files being read and compiled: handed by the entry to the server it starts (`PgliteWarmed`). */
export interface PgliteWarming {
  readonly wasmModule: Promise<WebAssembly.Module>
  readonly fsBundle: Promise<Buffer>
}

/** Starts reading and compiling PGlite's files; undefined when they cannot even be found. */
export const warmPglite = (): PgliteWarming | undefined => {
  try {
    const dist = pgliteDist()
    const warming = {
      wasmModule: readFile(join(dist, "pglite.wasm")).then((bytes) => WebAssembly.compile(plain(bytes))),
      fsBundle: readFile(join(dist, "pglite.data"))
    }
    // Unused or failed, they must not surface as unhandled rejections.
    warming.wasmModule.catch(() => {})
    warming.fsBundle.catch(() => {})
    return warming
  } catch {
    return undefined
  }
}

/** PGlite's options for what was warmed: what failed is left out, and PGlite reads it itself. */
export const warmedOptions = async (
  warming: PgliteWarming
): Promise<{ pgliteWasmModule?: WebAssembly.Module; fsBundle?: Blob }> => {
  const [wasmModule, fsBundle] = await Promise.allSettled([warming.wasmModule, warming.fsBundle])
  return {
    ...(wasmModule.status === "fulfilled" ? { pgliteWasmModule: wasmModule.value } : {}),
    ...(fsBundle.status === "fulfilled" ? { fsBundle: new Blob([plain(fsBundle.value)]) } : {})
  }
}
