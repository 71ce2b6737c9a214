/**
 * Code written against a released document keeps compiling and running: for each kept release
 * (`api/releases/<version>/openapi.yaml`) with a program in `fixtures/released-clients/`, types are
 * generated from the release's document and from the current one (openapi-typescript), the
 * program is compiled by tsc in strict mode against each (the first proves it was written against
 * the release), and then run with openapi-fetch against a real server (`npm start`).
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generatedTypes } from "../scripts/api-contract/TypeCompat.js"
import { compileClientProgram, writeClientProgram } from "./support/ClientProgram.js"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const run = promisify(execFile)
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

/** Compiles `program.ts` against `schema.d.ts` in `dir`; tsc's complaints, or "" when it compiles. */
const compile = (dir: string, schema: string): Promise<string> => {
  writeFileSync(join(dir, "schema.d.ts"), schema)
  return compileClientProgram(dir)
}

const prepare = (workDir: string, release: string, name: string = release): string => {
  const dir = join(workDir, name)
  mkdirSync(dir)
  writeClientProgram(dir, join(ROOT, `test/fixtures/released-clients/v${release}.ts`), "program.ts")
  return dir
}

describe("programs written against released documents, on the current server", () => {
  let server: ServerProcess
  // Inside the package, so that the programs resolve openapi-fetch from its node_modules.
  const workDir = mkdtempSync(join(ROOT, "node_modules", ".released-clients-"))
  let current = ""

  beforeAll(async () => {
    current = await generatedTypes(readFileSync(join(ROOT, "openapi.yaml"), "utf8"))
    server = await startServer({ ADMIN_TOKEN, DATA_DIR: join(workDir, "data") })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(workDir, { recursive: true, force: true })
  })

  it("0.4.0: compiles against its own and the current types, and runs", async () => {
    const dir = prepare(workDir, "0.4.0")
    const released = await generatedTypes(readFileSync(join(ROOT, "api/releases/0.4.0/openapi.yaml"), "utf8"))
    expect(await compile(dir, released), "against 0.4.0's own types").toBe("")
    expect(await compile(dir, current), "against the current document's types").toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(dir, "program.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result).toMatchObject({
      role: "admin",
      tokenType: "Bearer",
      listedIds: [result.clientId],
      echo: { body: { release: "0.4.0" }, profile: result.profile, service_uuid: result.uuid }
    })
    expect(result.clientId).toMatch(/^svc_[0-9a-f]{32}$/)
  }, 240_000)

  it("0.5.0: compiles against its own and the current types, and runs", async () => {
    const dir = prepare(workDir, "0.5.0")
    const released = await generatedTypes(readFileSync(join(ROOT, "api/releases/0.5.0/openapi.yaml"), "utf8"))
    expect(await compile(dir, released), "against 0.5.0's own types").toBe("")
    expect(await compile(dir, current), "against the current document's types").toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(dir, "program.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result).toMatchObject({
      expiresIn: 3600,
      tokenType: "Bearer",
      echo: { body: { amount: 42 }, profile: result.profile, service_uuid: result.uuid }
    })
  }, 240_000)

  it("0.4.0 code reading a credential's secret without narrowing compiles against the current types, and runs", async () => {
    const dir = prepare(workDir, "0.4.0", "0.4.0-unnarrowed")
    writeFileSync(
      join(dir, "program.ts"),
      readFileSync(join(dir, "program.ts"), "utf8").replace(
        "if (!(\"client_secret\" in answer)) throw new Error(\"POST credential {} answered a key credential\")\n",
        ""
      )
    )
    expect(readFileSync(join(dir, "program.ts"), "utf8")).not.toContain("\"client_secret\" in answer")
    expect(await compile(dir, await generatedTypes(readFileSync(join(ROOT, "api/releases/0.4.0/openapi.yaml"), "utf8")))).toBe("")
    expect(await compile(dir, current), "against the current document's types").toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(dir, "program.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result).toMatchObject({ role: "admin", tokenType: "Bearer", listedIds: [result.clientId] })
  }, 240_000)

  it("0.4.0 code reading a save's created[i].client_secret without narrowing compiles against the current types, and runs", async () => {
    const dir = prepare(workDir, "0.4.0-save")
    expect(await compile(dir, await generatedTypes(readFileSync(join(ROOT, "api/releases/0.4.0/openapi.yaml"), "utf8")))).toBe("")
    expect(await compile(dir, current), "against the current document's types").toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(dir, "program.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result).toMatchObject({ created: 1, tokenType: "Bearer" })
    expect(result.clientId).toMatch(/^svc_[0-9a-f]{32}$/)
  }, 90_000)

  it("a key credential through the current document's client: POST …/key-credentials, no narrowing", async () => {
    const dir = join(workDir, "key-credentials")
    mkdirSync(dir)
    writeClientProgram(dir, join(ROOT, "test/fixtures/key-credential-client.ts"), "program.ts")
    expect(await compile(dir, current)).toBe("")

    const { stdout } = await run(join(ROOT, "node_modules/.bin/tsx"), [join(dir, "program.ts")], {
      env: { ...process.env, BASE_URL: server.base, ADMIN_TOKEN }
    })
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
    expect(result.status).toBe(201)
    expect(result.method).toBe("private_key_jwt")
    expect(result.thumbprint).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(result.listed).toEqual([{ client_id: result.clientId, thumbprint: result.thumbprint }])
    expect(result.deprecation).toBeNull()
  }, 240_000)
})
