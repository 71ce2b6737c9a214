/**
 * `npm run api:release`: keeps `openapi.yaml` as the document of package.json's version, in
 * `api/releases/<version>/openapi.yaml`, the file `npm run check:api` compares later changes with
 * (docs/releases.md). Refuses to replace a kept release whose document differs: a released
 * contract does not change under its version.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { packageVersion, RELEASES_DIR } from "./api-contract/Releases.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const version = packageVersion(ROOT)
const dir = join(ROOT, RELEASES_DIR, version.text)
const target = join(dir, "openapi.yaml")
const current = readFileSync(join(ROOT, "openapi.yaml"), "utf8")
if (existsSync(target) && readFileSync(target, "utf8") !== current && !process.argv.includes("--replace")) {
  console.error(`${target} exists and differs: a released document is not changed (--replace before tagging only)`)
  process.exit(1)
}
mkdirSync(dir, { recursive: true })
copyFileSync(join(ROOT, "openapi.yaml"), target)
console.log(`kept ${target}`)
