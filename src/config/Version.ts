/**
 * The release this code is: package.json's `version` (semantic versioning, docs/releases.md), read
 * once from the one place it is written. `/healthz`, the OpenAPI document's `info.version`,
 * `service-auth --version`, the server's `--version` and the trace exporter's resource all say it.
 * The CLI and the server are bundles in `dist/`, so the file is read at run time from the package's
 * root rather than imported (an import would copy the number into each bundle at build time).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { PACKAGE_ROOT } from "./PackageRoot.js"

const readVersion = (): string => {
  const version: unknown = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")).version
  if (typeof version !== "string" || !/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(version)) {
    throw new Error(`package.json in ${PACKAGE_ROOT}: version ${JSON.stringify(version)} is not a semantic version`)
  }
  return version
}

export const SERVICE_VERSION: string = readVersion()
