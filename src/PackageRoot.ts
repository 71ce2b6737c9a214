/**
 * The package's root folder, where `migrations/` and the web assets (`src/web/`) live. This file
 * sits one level below the root both as source (`src/`) and compiled (`dist/`), so the same path
 * works for `tsx` and for `node dist/main.js`, whatever the working directory.
 */
import { fileURLToPath } from "node:url"

export const PACKAGE_ROOT = fileURLToPath(new URL("../", import.meta.url))
