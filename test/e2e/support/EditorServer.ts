/**
 * One real server (`npm start`'s bundle, on an embedded database of its own) and one headless
 * Chromium per browser-test file, with what every file does with them: a page at a given width, the
 * admin API for fixtures and for checking what a page did, and the editor's sign-in. A failed test
 * leaves a screenshot in `test-results/`.
 *
 * `useEditorServer` registers the file's hooks; `page`, `base` and `ADMIN_TOKEN` are live bindings
 * (each browser-test file runs in a process of its own, so they are that file's).
 */
import { randomBytes } from "node:crypto"
import { mkdir, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest"
import { type ServerProcess, startServer } from "../../support/ServerProcess.js"

export const RESULTS = join(fileURLToPath(new URL("../../../", import.meta.url)), "test-results")
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run"
]

export const ADMIN_TOKEN = randomBytes(24).toString("base64url")

let server: ServerProcess | undefined
let dataDir: string | undefined
let browser: Browser | undefined
let context: BrowserContext | undefined
/** The server's base URL, once started. */
export let base = ""
/** The current test's page (`newPage`). */
export let page: Page

export interface EditorServerOptions {
  /** Names the data directory. */
  readonly name: string
  /** More of the server's environment (ADMIN_TOKEN and DATA_DIR are set). */
  readonly env?: Readonly<Record<string, string>>
  /** A fresh 1280 px page before each test (else each test opens its own with `newPage`). */
  readonly pagePerTest?: boolean
}

/** A page of its own at `width` × `height`, with the clipboard allowed, replacing the previous one. */
export async function newPage(width = 1280, height = 900): Promise<Page> {
  await context?.close().catch(() => undefined)
  context = await browser!.newContext({ viewport: { width, height }, locale: "en-US", timezoneId: "UTC" })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base })
  page = await context.newPage()
  // A deadline for a hang, not a speed limit: on a busy machine a click waits seconds for a repaint.
  page.setDefaultTimeout(30_000)
  return page
}

/** Registers the file's hooks: the server and the browser for the file, a page per test, a screenshot of a failure. */
export function useEditorServer(options: EditorServerOptions): void {
  beforeAll(async () => {
    await mkdir(RESULTS, { recursive: true })
    dataDir = await mkdtemp(join(tmpdir(), `service-auth-e2e-${options.name}-`))
    server = await startServer({ ...options.env, DATA_DIR: dataDir, ADMIN_TOKEN }, { healthTimeoutMs: 100_000 })
    base = server.base
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS })
  })

  afterAll(async () => {
    await browser?.close().catch(() => undefined)
    await server?.stop(10_000)
    if (dataDir) await rm(dataDir, { recursive: true, force: true })
  })

  if (options.pagePerTest === true) {
    beforeEach(async () => {
      await newPage()
    })
  }

  afterEach(async (ctx) => {
    if (ctx.task.result?.state === "fail" && page && !page.isClosed()) {
      const name = ctx.task.name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-|-$/g, "").slice(0, 120)
      await page.screenshot({ path: join(RESULTS, `${name}.png`), fullPage: true }).catch(() => undefined)
    }
    await context?.close().catch(() => undefined)
    context = undefined
  })
}

/** The admin API with `token` (the admin token by default): the status and the parsed body. */
export async function adminApi(method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }
  if (body !== undefined) init.body = JSON.stringify(body)
  const response = await fetch(`${base}${path}`, init)
  const text = await response.text()
  return { status: response.status, body: text ? (JSON.parse(text) as any) : null }
}

/** Opens the editor at `hash` and signs in with `token` (the admin token by default). */
export async function signIn(p: Page, token = ADMIN_TOKEN, hash = "#/profiles") {
  await p.goto(`${base}/admin${hash}`)
  await p.getByLabel("Admin token", { exact: true }).fill(token)
  await p.getByRole("button", { name: "Sign in", exact: true }).click()
}
