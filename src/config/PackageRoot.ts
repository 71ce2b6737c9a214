/**
 * The package's root folder, where `migrations/` and the web assets (`src/web/`) live: the nearest
 * folder above this module that holds `package.json`. This module sits at different depths as
 * source (`src/config/`), compiled (`dist/config/`) and bundled (a chunk in `dist/`), so the root is
 * found rather than counted, and the same path works for `tsx` and for `node dist/...`, whatever the
 * working directory.
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const packageRootAbove = (folder: string): string => {
  if (existsSync(join(folder, "package.json"))) return folder
  const parent = dirname(folder)
  // Nothing above holds package.json (a copied module): the folder above this one, as before.
  return parent === folder ? fileURLToPath(new URL("../", import.meta.url)) : packageRootAbove(parent)
}

export const PACKAGE_ROOT = packageRootAbove(fileURLToPath(new URL(".", import.meta.url)))
