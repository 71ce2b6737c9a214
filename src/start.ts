/**
 * `npm start`'s entry (bundled as `dist/service-auth.mjs`): on the embedded database, PGlite's
 * WebAssembly starts compiling on V8's background threads (`PgliteWarmup`) before the server's own
 * modules (`main.ts`, loaded next) are parsed on the main thread, so the two overlap instead of
 * following each other.
 */
import { warmPglite } from "./storage/PgliteWarmup.js"

// Only a hint: the configuration proper is read and checked by main.ts (an unused warm-up costs nothing there).
if ((process.env.DATABASE_URL ?? "").trim() === "") warmPglite()

await import("./main.js")
