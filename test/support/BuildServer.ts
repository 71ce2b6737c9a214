/**
 * Vitest global setup: builds `dist/` when a source is newer than the last build (what `npm start`'s
 * staleness check does), so the process tests run the server exactly as `npm start` runs it.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

export default function setup() {
  execFileSync(process.execPath, [fileURLToPath(new URL("../../scripts/build.mjs", import.meta.url)), "--if-stale"], {
    stdio: "inherit"
  })
}
