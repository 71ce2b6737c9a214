/**
 * A typed client generated from the committed openapi.yaml works as an integrator would use it:
 * openapi-typescript turns the document into types, tsc compiles `fixtures/generated-client/client.ts`
 * (openapi-fetch) against them in strict mode, with no dummy bodies, and the program creates a
 * profile, an environment, a service, a secret and a key credential (told apart by their
 * discriminator), gets a token with each client authentication (client_secret_post,
 * client_secret_basic, private_key_jwt) and calls the service with each, on a real server
 * (`npm start`).
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import openapiTS, { astToString } from "openapi-typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { compileClientProgram, writeClientProgram } from "./support/ClientProgram.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const run = promisify(execFile)
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

describe("a client generated from openapi.yaml (openapi-typescript + openapi-fetch)", () => {
  let server: ServerProcess
  // Inside the package, so that the program resolves openapi-fetch from its node_modules.
  const workDir = mkdtempSync(join(ROOT, "node_modules", ".generated-client-"))

  beforeAll(async () => {
    server = await startServer({ ADMIN_TOKEN, DATA_DIR: join(workDir, "data") })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(workDir, { recursive: true, force: true })
  })

  it("generates types, compiles the program strictly, and runs it end to end", async () => {
    const document = readFileSync(join(ROOT, "openapi.yaml"), "utf8")
    writeFileSync(join(workDir, "schema.d.ts"), astToString(await openapiTS(document)))
    writeClientProgram(workDir, join(ROOT, "test/fixtures/generated-client/client.ts"), "client.ts")

    const compiled = await compileClientProgram(workDir)
    expect(compiled, "tsc found type errors in the generated client program").toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(workDir, "client.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result).toMatchObject({
      handlerType: "echo",
      credentialCount: 2,
      expiresIn: 3600,
      tokenTypes: ["Bearer", "Bearer", "Bearer"],
      calls: ["client_secret_post", "client_secret_basic", "private_key_jwt"].map((method) => ({
        body: { amount: 42, method },
        profile: result.profile,
        service_uuid: result.uuid
      }))
    })
    expect(result.thumbprint).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(Number.isNaN(Date.parse(result.createdAt))).toBe(false)
  }, 240_000)
})
