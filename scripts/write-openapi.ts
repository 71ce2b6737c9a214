/** Writes `openapi.yaml` from the HttpApi (`npm run openapi`). A test fails when the committed file is stale. */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { openApiYaml } from "../src/server/OpenApiDocument.js"

const target = fileURLToPath(new URL("../openapi.yaml", import.meta.url))
writeFileSync(target, openApiYaml())
console.log(`wrote ${target}`)
