/**
 * The API reference at /docs, rendered in a real Chromium by the real server (a child process with a
 * fresh data directory, and an ISSUER naming another host): everything the page loads comes from
 * the server that served it, and its Content-Security-Policy refuses nothing Scalar needs.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest"
import { type ServerProcess, startServer } from "../support/ServerProcess.js"

const ROOT = fileURLToPath(new URL("../../", import.meta.url))
const RESULTS = join(ROOT, "test-results")
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

let server: ServerProcess | undefined
let dataDir: string | undefined
let base = ""
let browser: Browser | undefined
let context: BrowserContext | undefined
let page: Page

/** What the page did, as the browser saw it. */
interface Observed {
  readonly requests: Array<string>
  readonly consoleErrors: Array<string>
  readonly pageErrors: Array<string>
}
let observed: Observed

interface Violation {
  readonly directive: string
  readonly blockedURI: string
  readonly sourceFile: string
  readonly line: number
  readonly column: number
}

beforeAll(async () => {
  await mkdir(RESULTS, { recursive: true })
  dataDir = await mkdtemp(join(tmpdir(), "service-auth-docs-e2e-"))
  server = await startServer({ DATA_DIR: dataDir, ISSUER: "https://auth.example.test" }, { healthTimeoutMs: 100_000 })
  base = server.base
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS })
})

afterAll(async () => {
  await browser?.close().catch(() => undefined)
  await server?.stop(10_000)
  if (dataDir) await rm(dataDir, { recursive: true, force: true })
})

beforeEach(async () => {
  context = await browser!.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US", timezoneId: "UTC" })
  observed = { requests: [], consoleErrors: [], pageErrors: [] }
  // On the context, so requests of workers and of any other page it opens are seen too.
  context.on("request", (request) => observed.requests.push(request.url()))
  // Listening from before the page's first script, so no violation goes unseen.
  await context.addInitScript(() => {
    const seen: Array<unknown> = []
    ;(window as unknown as { __violations: Array<unknown> }).__violations = seen
    document.addEventListener("securitypolicyviolation", (event) =>
      seen.push({
        directive: event.effectiveDirective,
        blockedURI: event.blockedURI,
        sourceFile: event.sourceFile,
        line: event.lineNumber,
        column: event.columnNumber
      }), true)
  })
  page = await context.newPage()
  page.setDefaultTimeout(30_000)
  page.on("console", (message) => {
    if (message.type() === "error") observed.consoleErrors.push(message.text())
  })
  page.on("pageerror", (error) => observed.pageErrors.push(error.message))
})

afterEach(async (ctx) => {
  if (ctx.task.result?.state === "fail" && page && !page.isClosed()) {
    const name = ctx.task.name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-|-$/g, "").slice(0, 120)
    await page.screenshot({ path: join(RESULTS, `docs-${name}.png`), fullPage: false }).catch(() => undefined)
  }
  await context?.close().catch(() => undefined)
  context = undefined
})

const violations = () => page.evaluate(() => (window as unknown as { __violations: Array<Violation> }).__violations)

/**
 * Violations other than the one Scalar is known to cause and survive: its validation library (zod)
 * tries `new Function("")` once to learn whether it may compile validators, catches the refusal and
 * interprets instead. That one is recognised by the code at the reported place in the bundle.
 */
const unexpectedViolations = async () => {
  const script = (await (await fetch(`${base}/docs/scalar.js`)).text()).split("\n")
  return (await violations()).filter((violation) => {
    const probe = violation.directive === "script-src" && violation.blockedURI === "eval" &&
      violation.sourceFile === `${base}/docs/scalar.js` &&
      (script[violation.line - 1] ?? "").slice(violation.column - 1, violation.column + 40).startsWith("new Function(\"\")")
    return !probe
  })
}

const expectOnlyOwnOrigin = () => {
  const origin = new URL(base).origin
  expect(observed.requests.length).toBeGreaterThan(0)
  expect(observed.requests.filter((url) => new URL(url).origin !== origin)).toEqual([])
}

const expectNoPolicyBreach = async () => {
  expect(await unexpectedViolations()).toEqual([])
  expect(observed.consoleErrors.filter((text) => /content security policy/i.test(text))).toEqual([])
  expect(observed.pageErrors).toEqual([])
}

describe("GET /docs in Chromium", () => {
  test("says it is loading until the reference has rendered, then only the reference shows", async () => {
    // Hold the bundle back, so the moment before Scalar renders can be looked at.
    let release = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    await page.route("**/docs/scalar.js", async (route) => {
      await held
      await route.continue()
    })
    // Not "domcontentloaded": that waits for the held script.
    await page.goto(`${base}/docs`, { waitUntil: "commit" })
    const loading = page.getByRole("status").filter({ hasText: "Loading the API reference" })
    await loading.waitFor({ state: "visible" })
    await page.screenshot({ path: join(RESULTS, "docs-loading.png") })
    release()
    await page.getByRole("navigation").first().getByText("Obtain an access token (client credentials grant)", { exact: true }).waitFor()
    await expect.poll(() => loading.isVisible()).toBe(false)
  })

  test("the token request's generated example authenticates the client one way", async () => {
    await page.goto(`${base}/docs`)
    await page.getByRole("heading", { name: "Obtain an access token (client credentials grant)" }).first().waitFor()
    const examples = await page.locator("pre, code").evaluateAll((nodes) =>
      nodes.map((node) => node.textContent ?? "").filter((text) => text.includes("curl") && text.includes("/oauth/token"))
    )
    expect(examples.length).toBeGreaterThan(0)
    for (const example of examples) {
      const basic = /--user|authorization: basic/i.test(example)
      expect({ example, both: basic && /client_id/.test(example) }).toEqual({ example, both: false })
    }
    await page.screenshot({ path: join(RESULTS, "docs-token-example.png"), fullPage: false })
  })

  test("renders the reference of this server's openapi.yaml, loading only from this server", async () => {
    await page.goto(`${base}/docs`)
    const sidebar = page.getByRole("navigation").first()
    await sidebar.getByText("Obtain an access token (client credentials grant)", { exact: true }).waitFor()
    await page.getByRole("heading", { name: "service-auth", exact: true }).waitFor()
    // Opening a tag in the sidebar shows its operations in the reference, the service call here.
    await sidebar.getByText("Service calls", { exact: true }).click()
    await sidebar.getByText("Call a hosted service", { exact: true }).click()
    await page.getByRole("heading", { name: "Call a hosted service", exact: true }).waitFor()

    expect(observed.requests).toEqual(expect.arrayContaining([`${base}/docs`, `${base}/docs/scalar.js`, `${base}/openapi.yaml`]))
    expectOnlyOwnOrigin()
    await expectNoPolicyBreach()
    expect(observed.consoleErrors).toEqual([])
    // Scalar's own fonts are off: the page uses the system's.
    expect(await page.evaluate(() => (document.fonts as unknown as { size: number }).size)).toBe(0)
  })

  test("a test request from the reference goes to the server that served the page", async () => {
    await page.goto(`${base}/docs`)
    const sent = page.waitForRequest((request) => request.method() === "POST" && request.url().endsWith("/oauth/token"))
    await page.getByRole("button", { name: /Test Request/ }).first().click()
    await page.getByRole("button", { name: /^Send/ }).first().click()
    const request = await sent
    expect(request.url()).toBe(`${base}/oauth/token`)
    // The example sends the client's credentials one way only: never a Basic header beside client_id
    // and client_secret in the form, which the server refuses ("Use exactly one ...").
    const form = new URLSearchParams(request.postData() ?? "")
    const basic = /^basic /i.test(request.headers()["authorization"] ?? "")
    expect(basic && (form.has("client_id") || form.has("client_secret"))).toBe(false)
    const answer = await request.response()
    // The server answered it (the example's made-up target is a 400 invalid_request), and the page shows it.
    expect(answer?.status()).toBe(400)
    expect(await answer?.text()).not.toContain("Use exactly one client authentication method")
    await page.getByText("invalid_request").first().waitFor()

    expectOnlyOwnOrigin()
    await expectNoPolicyBreach()
  })
})
