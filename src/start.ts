/**
 * `npm start`'s entry (bundled as `dist/service-auth.mjs`): on the embedded database, PGlite's
 * WebAssembly starts compiling on V8's background threads (`PgliteWarmup`) before the server's own
 * modules (`ServerMain.ts`, loaded next) are parsed on the main thread, so the two overlap instead of
 * following each other. On Node 22 and later, the modules' compiled code is cached between starts.
 */
import * as NodeModule from "node:module"
import { fileURLToPath } from "node:url"
import { warmPglite } from "./storage/PgliteWarmup.js"

// Node 22.1+: V8's compiled code of the modules loaded next is kept in dist/.compile-cache (beside
// this bundle, so a rebuild drops it) and reused by the next start. Node 20 has no such cache.
const { enableCompileCache } = NodeModule as { enableCompileCache?: (directory: string) => unknown }
enableCompileCache?.(fileURLToPath(new URL(".compile-cache/", import.meta.url)))

// Only a hint: the configuration proper is read and checked by ServerMain.ts (an unused warm-up costs nothing there).
const warming = (process.env.DATABASE_URL ?? "").trim() === "" ? warmPglite() : undefined

const { run } = await import("./ServerMain.js")
run(warming)
