/**
 * The profile editor at /admin, driven in a real Chromium against the real server (a child process
 * with a fresh data directory). Fixtures are set up through the admin JSON API; the page is driven
 * only by labels, roles and button names, as a person with a keyboard or a screen reader would.
 */
import { generateKeyPairSync, type KeyObject, randomBytes, randomUUID } from "node:crypto"
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { SignJWT } from "jose"
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from "playwright-core"
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
const ADMIN_TOKEN = randomBytes(24).toString("base64url")
/** A named admin token (ADMIN_TOKENS): the history shows its name. */
const ALICE_TOKEN = randomBytes(24).toString("base64url")

let server: ServerProcess | undefined
let dataDir: string | undefined
let base = ""
let browser: Browser | undefined
let context: BrowserContext | undefined
let page: Page

// -------------------------------------------------------------------------------------------------
// Server and browser lifecycle

beforeAll(async () => {
  await mkdir(RESULTS, { recursive: true })
  dataDir = await mkdtemp(join(tmpdir(), "service-auth-e2e-"))
  server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, ADMIN_TOKENS: `alice:${ALICE_TOKEN}` }, { healthTimeoutMs: 100_000 })
  base = server.base
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS })
})

afterAll(async () => {
  await browser?.close().catch(() => undefined)
  await server?.stop(10_000)
  if (dataDir) await rm(dataDir, { recursive: true, force: true })
})

async function newPage(width = 1280, height = 900) {
  await context?.close().catch(() => undefined)
  context = await browser!.newContext({ viewport: { width, height }, locale: "en-US", timezoneId: "UTC" })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base })
  page = await context.newPage()
  // A deadline for a hang, not a speed limit: on a busy machine a click waits seconds for a repaint.
  page.setDefaultTimeout(30_000)
  return page
}

beforeEach(async () => {
  await newPage()
})

afterEach(async (ctx) => {
  if (ctx.task.result?.state === "fail" && page && !page.isClosed()) {
    const name = ctx.task.name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-|-$/g, "").slice(0, 120)
    await page.screenshot({ path: join(RESULTS, `${name}.png`), fullPage: true }).catch(() => undefined)
  }
  await context?.close().catch(() => undefined)
  context = undefined
})

// -------------------------------------------------------------------------------------------------
// The JSON API, for fixtures and for checking what the page did

async function adminApi(method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }
  if (body !== undefined) init.body = JSON.stringify(body)
  const response = await fetch(`${base}${path}`, init)
  const text = await response.text()
  return { status: response.status, body: text ? (JSON.parse(text) as any) : null }
}

interface Fixture {
  readonly profile: string
  readonly env: string
  readonly uuid: string
  readonly serviceName: string
}

let fixtureSeq = 0

/** A fresh profile with one environment and one OAuth service. */
async function fixture(prefix: string, serviceName = "Billing API", env = "prod"): Promise<Fixture> {
  const profile = `${prefix}-${++fixtureSeq}-${randomBytes(3).toString("hex")}`
  expect((await adminApi("PUT", `/admin/profiles/${profile}`, {})).status).toBe(201)
  expect((await adminApi("PUT", `/admin/profiles/${profile}/environments/${env}`, {})).status).toBe(201)
  return addService({ profile, env, uuid: "", serviceName }, serviceName)
}

async function addService(f: Fixture, serviceName: string, authType = "oauth"): Promise<Fixture> {
  const created = await adminApi("POST", `/admin/profiles/${f.profile}/environments/${f.env}/services`, {
    name: serviceName,
    auth_type: authType
  })
  expect(created.status).toBe(201)
  return { profile: f.profile, env: f.env, uuid: created.body.uuid as string, serviceName }
}

/** Creates a credential directly through the API (not through the page). */
async function apiCredential(f: Fixture): Promise<{ client_id: string; client_secret: string }> {
  const created = await adminApi("POST", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}/credentials`, {})
  expect(created.status).toBe(201)
  return created.body
}

/** A token request for the fixture's service, authenticated by `client` (a secret or an assertion). */
async function tokenFor(f: Fixture, client: Record<string, string>) {
  const response = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...client, profile: f.profile, environment: f.env, service_uuid: f.uuid })
  })
  return { status: response.status, body: (await response.json()) as any }
}

const requestToken = (f: Fixture, clientId: string, clientSecret: string) =>
  tokenFor(f, { client_id: clientId, client_secret: clientSecret })

async function callService(f: Fixture, accessToken: string) {
  const response = await fetch(`${base}/service/${f.profile}/${f.env}/json/${f.uuid}`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    body: JSON.stringify({ hello: "world" })
  })
  const text = await response.text()
  let body: any = null
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, body }
}

// -------------------------------------------------------------------------------------------------
// Page helpers

async function signIn(p: Page, token = ADMIN_TOKEN, hash = "#/profiles") {
  await p.goto(`${base}/admin${hash}`)
  await p.getByLabel("Admin token", { exact: true }).fill(token)
  await p.getByRole("button", { name: "Sign in", exact: true }).click()
}

async function openEditor(p: Page, profile: string) {
  await signIn(p, ADMIN_TOKEN, `#/profiles/${profile}`)
  await p.getByRole("heading", { level: 1, name: profile, exact: true }).waitFor()
  await p.getByRole("button", { name: "Save profile", exact: true }).waitFor()
}

const serviceRegion = (p: Page, name: string) => p.getByRole("region", { name, exact: true })
const addButton = (region: Locator) => region.getByRole("button", { name: "Add credential", exact: true })
const saveButton = (p: Page) => p.getByRole("button", { name: "Save profile", exact: true })
const credentialRow = (region: Locator, clientId: string) => region.getByRole("row").filter({ hasText: clientId })
const alertText = async (p: Page) => (await p.getByRole("alert").textContent()) ?? ""

/** Records the body of every save request the page sends. */
function recordSaves(p: Page) {
  const saves: Array<unknown> = []
  p.on("request", (request) => {
    if (request.method() === "POST" && /\/admin\/profiles\/[^/]+\/save$/.test(new URL(request.url()).pathname)) {
      saves.push(request.postDataJSON())
    }
  })
  return saves
}

/** Saves and reads the one new secret from the panel (Client ID / Client secret fields). */
async function saveAndReadSecret(p: Page) {
  if (await saveButton(p).isEnabled()) await saveButton(p).click()
  const secretField = p.getByLabel("Client secret", { exact: true })
  await secretField.waitFor()
  await p.getByText("This secret will not be shown again").waitFor()
  const clientId = await p.getByLabel("Client ID", { exact: true }).inputValue()
  const clientSecret = await secretField.inputValue()
  expect(clientId).toMatch(/^svc_[0-9a-f]{32}$/)
  expect(clientSecret.length).toBeGreaterThanOrEqual(32)
  expect(await secretField.getAttribute("readonly")).not.toBeNull()
  return { clientId, clientSecret }
}

/** A token for a key credential's client: `private_key_jwt` signed with its private key (`aud` the issuer). */
async function keyToken(f: Fixture, clientId: string, privateKey: KeyObject, alg: "ES256" | "RS256") {
  const now = Math.floor(Date.now() / 1000)
  // The assertion's audience is the issuer identifier, as discovery says it (ISSUER, or localhost by default).
  const { issuer } = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as { issuer: string }
  const assertion = await new SignJWT({ iss: clientId, sub: clientId, aud: issuer, jti: randomUUID(), iat: now, exp: now + 60 })
    .setProtectedHeader({ alg })
    .sign(privateKey)
  return tokenFor(f, { client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: assertion })
}

/** Pastes `text` into a service's "Add a public key" form and stages it. */
async function stageKey(service: Locator, text: string) {
  const field = service.getByLabel("Public key (JWK or PEM)", { exact: true })
  // The form stays open after a refusal, and closes once a key is staged.
  if (!(await field.isVisible())) await service.getByText("Add a public key", { exact: true }).click()
  await field.fill(text)
  await service.getByRole("button", { name: "Stage key credential", exact: true }).click()
}

/** Saves a profile whose staged additions are key credentials: no secret is shown. */
async function saveKeys(p: Page, saves: Array<unknown>) {
  const before = saves.length
  await saveButton(p).click()
  await expect.poll(() => saves.length).toBe(before + 1)
  await expect.poll(() => p.getByText("No unsaved changes.").count()).toBe(1)
  expect(await p.getByLabel("Client secret", { exact: true }).count()).toBe(0)
}

const activeElementLabel = (p: Page) =>
  p.evaluate(() => {
    const el = document.activeElement
    return el ? el.getAttribute("aria-label") ?? el.textContent ?? "" : ""
  })

// -------------------------------------------------------------------------------------------------

describe("profile editor", () => {
  test("serves the page and its assets", async () => {
    const html = await fetch(`${base}/admin`)
    expect(html.status).toBe(200)
    expect(html.headers.get("content-type")).toContain("text/html")
    const text = await html.text()
    expect(text).toContain("src=\"/admin/assets/app.js\"")
    expect(text).toContain("href=\"/admin/assets/app.css\"")
    expect((await fetch(`${base}/admin/assets/app.js`)).status).toBe(200)
    expect((await fetch(`${base}/admin/assets/app.css`)).status).toBe(200)
  })

  test("a wrong admin token is refused in words and nothing is stored", async () => {
    await signIn(page, "not-the-admin-token")
    await expect.poll(() => alertText(page)).toMatch(/admin token was rejected/i)
    expect(await page.getByLabel("Admin token", { exact: true }).isVisible()).toBe(true)
    expect(await page.getByRole("button", { name: "Sign out" }).isVisible()).toBe(false)
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)

    // The right token then works, lists profiles, and signing out forgets it.
    const f = await fixture("signin")
    await page.getByLabel("Admin token", { exact: true }).fill(ADMIN_TOKEN)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Profiles" }).waitFor()
    await page.getByRole("link", { name: f.profile, exact: true }).waitFor()
    expect(page.url()).not.toContain(ADMIN_TOKEN)
    expect(await page.evaluate(() => document.cookie)).toBe("")
    await page.getByRole("button", { name: "Sign out", exact: true }).click()
    await page.getByLabel("Admin token", { exact: true }).waitFor()
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
  })

  test("rotation: add, save, read the secret once, add a second, remove the first", async () => {
    const f = await fixture("rotation")
    const saves = recordSaves(page)
    await signIn(page)
    await page.getByRole("link", { name: f.profile, exact: true }).click()
    await page.getByRole("heading", { level: 1, name: f.profile, exact: true }).waitFor()

    const service = serviceRegion(page, f.serviceName)
    await service.getByText(f.uuid).waitFor()
    expect(await service.getByText("OAuth 2.0 (Client Credentials)").count()).toBeGreaterThan(0)
    expect(await saveButton(page).isDisabled()).toBe(true)

    // 1. Add a credential: staged, visibly pending, then saved exactly once.
    await addButton(service).click()
    await service.getByText("Pending: new credential").waitFor()
    expect(await saveButton(page).isEnabled()).toBe(true)
    // Even an impatient double click sends one save.
    await saveButton(page).dblclick()
    const first = await saveAndReadSecret(page)
    expect(saves).toEqual([{ changes: [{ op: "add_credential", environment: f.env, service_uuid: f.uuid }] }])
    const row1 = credentialRow(service, first.clientId)
    await expect.poll(() => row1.textContent()).toContain("never")
    expect(await service.getByText("Pending: new credential").count()).toBe(0)

    // The Copy button puts the secret on the clipboard.
    await page.getByRole("button", { name: "Copy", exact: true }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(first.clientSecret)

    // Dismissing the panel removes the secret from the page.
    await page.getByRole("button", { name: "Dismiss", exact: true }).click()
    await expect.poll(() => page.getByLabel("Client secret", { exact: true }).count()).toBe(0)
    expect(await page.content()).not.toContain(first.clientSecret)

    // 2. The caller gets a token with it; "Last used" shows it after a refresh.
    const token1 = await requestToken(f, first.clientId, first.clientSecret)
    expect(token1.status).toBe(200)
    expect(typeof token1.body.access_token).toBe("string")
    await page.getByRole("button", { name: "Refresh", exact: true }).click()
    await expect.poll(() => row1.textContent()).not.toContain("never")

    // 3. Add a second credential (the staged one counts toward the limit at once).
    await addButton(service).click()
    await expect.poll(() => addButton(service).isDisabled()).toBe(true)
    const second = await saveAndReadSecret(page)
    expect(second.clientId).not.toBe(first.clientId)
    expect(saves).toHaveLength(2)
    await page.getByRole("button", { name: "Dismiss", exact: true }).click()
    await expect.poll(() => credentialRow(service, second.clientId).count()).toBe(1)
    // Two live credentials: the limit.
    expect(await addButton(service).isDisabled()).toBe(true)
    const token2 = await requestToken(f, second.clientId, second.clientSecret)
    expect(token2.status).toBe(200)

    // 4. Remove the first one, confirming in the dialog.
    await service.getByRole("button", { name: `Remove ${first.clientId}`, exact: true }).click()
    const dialog = page.getByRole("dialog", { name: "Remove this credential?" })
    await dialog.waitFor()
    expect(await dialog.getAttribute("aria-modal")).toBe("true")
    await dialog.getByRole("button", { name: "Remove credential", exact: true }).click()
    await expect.poll(() => dialog.count()).toBe(0)
    await expect.poll(() => row1.textContent()).toContain("pending removal")
    expect(await row1.evaluate((row) => row.classList.contains("pending-removal"))).toBe(true)
    // live 2 − 1 staged removal = 1: adding is possible again.
    expect(await addButton(service).isEnabled()).toBe(true)
    // Nothing happens on the server before saving.
    expect((await requestToken(f, first.clientId, first.clientSecret)).status).toBe(200)

    await saveButton(page).click()
    await expect.poll(() => row1.count()).toBe(0)
    expect(saves).toHaveLength(3)
    expect(saves[2]).toEqual({
      changes: [{ op: "remove_credential", environment: f.env, service_uuid: f.uuid, client_id: first.clientId }]
    })
    expect(await page.getByLabel("Client secret", { exact: true }).count()).toBe(0)
    expect(await credentialRow(service, second.clientId).count()).toBe(1)

    // 5. The old credential is refused at the token endpoint; the new one works.
    const refused = await requestToken(f, first.clientId, first.clientSecret)
    expect(refused.status).toBe(401)
    expect(refused.body).toEqual({ error: "invalid_client", error_description: "Invalid client credentials" })
    const fresh = await requestToken(f, second.clientId, second.clientSecret)
    expect(fresh.status).toBe(200)

    // 6. At the service endpoint the old token dies with its credential.
    const withNew = await callService(f, fresh.body.access_token)
    expect(withNew.status).toBe(200)
    const withOld = await callService(f, token1.body.access_token)
    expect(withOld.status).toBe(401)
    expect(withOld.body.error).toBe("invalid_token")
  })

  test("the limit: Add credential is disabled at 2, counting staged changes", async () => {
    const f = await fixture("limit")
    const live1 = await apiCredential(f)
    const saves = recordSaves(page)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await credentialRow(service, live1.client_id).waitFor()

    // 1 live + 1 staged = 2: disabled, and the reason is given in words.
    expect(await addButton(service).isEnabled()).toBe(true)
    await addButton(service).click()
    await expect.poll(() => addButton(service).isDisabled()).toBe(true)
    expect(await service.textContent()).toContain("at most 2 credentials")
    await service.getByRole("button", { name: "Undo new credential", exact: true }).click()
    await expect.poll(() => addButton(service).isEnabled()).toBe(true)
    await expect.poll(() => saveButton(page).isDisabled()).toBe(true)

    // 2 live: disabled. Staging a removal frees a place; staging an add takes it again.
    const live2 = await apiCredential(f)
    await page.getByRole("button", { name: "Refresh", exact: true }).click()
    await credentialRow(service, live2.client_id).waitFor()
    await expect.poll(() => addButton(service).isDisabled()).toBe(true)
    await service.getByRole("button", { name: `Remove ${live1.client_id}`, exact: true }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove credential", exact: true }).click()
    await expect.poll(() => addButton(service).isEnabled()).toBe(true)
    await addButton(service).click()
    await expect.poll(() => addButton(service).isDisabled()).toBe(true)
    expect(await page.getByText("2 unsaved changes").count()).toBe(1)

    // One save applies both, removals first.
    const created = await saveAndReadSecret(page)
    expect(saves).toEqual([
      {
        changes: [
          { op: "remove_credential", environment: f.env, service_uuid: f.uuid, client_id: live1.client_id },
          { op: "add_credential", environment: f.env, service_uuid: f.uuid }
        ]
      }
    ])
    await expect.poll(() => credentialRow(service, live1.client_id).count()).toBe(0)
    await credentialRow(service, created.clientId).waitFor()
    expect(await addButton(service).isDisabled()).toBe(true)
  })

  test("a key credential from a pasted JWK: staged, saved without a secret, listed with its kid, and it gets tokens", async () => {
    const f = await fixture("jwk")
    const saves = recordSaves(page)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
    const jwk = { ...publicKey.export({ format: "jwk" }), kid: "laptop-2026" }

    // A private JWK is refused in words; nothing is staged.
    await stageKey(service, JSON.stringify(privateKey.export({ format: "jwk" })))
    await expect.poll(() => alertText(page)).toContain("This JWK holds private members (d)")
    expect(await saveButton(page).isDisabled()).toBe(true)

    await stageKey(service, JSON.stringify(jwk, null, 2))
    await service.getByText("Pending: new key credential").waitFor()
    expect(await service.textContent()).toContain("Public key: EC P-256, kid laptop-2026")
    // A staged key counts toward the limit like any credential.
    await addButton(service).click()
    await expect.poll(() => addButton(service).isDisabled()).toBe(true)
    await service.getByText("Add a public key", { exact: true }).click()
    expect(await service.getByRole("button", { name: "Stage key credential", exact: true }).isDisabled()).toBe(true)
    await service.getByRole("button", { name: "Undo new credential 2", exact: true }).click()

    await saveKeys(page, saves)
    expect(saves).toEqual([{ changes: [{ op: "add_key_credential", environment: f.env, service_uuid: f.uuid, public_key: jwk }] }])
    const listed = (await adminApi("GET", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`)).body.credentials
    expect(listed).toHaveLength(1)
    const { client_id: clientId, public_key: info } = listed[0]
    expect(info).toMatchObject({ kty: "EC", kid: "laptop-2026" })
    const row = credentialRow(service, clientId)
    await expect.poll(() => row.textContent()).toContain("Public key (EC P-256, no secret) · kid laptop-2026")
    expect(await row.textContent()).toContain(info.thumbprint)

    const token = await keyToken(f, clientId, privateKey, "ES256")
    expect({ status: token.status, type: token.body.token_type }).toEqual({ status: 200, type: "Bearer" })
  })

  test("a key credential from a pasted PEM: converted to a JWK in the browser; a private PEM is refused", async () => {
    const f = await fixture("pem")
    const saves = recordSaves(page)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })

    await stageKey(service, privateKey.export({ type: "pkcs8", format: "pem" }).toString())
    await expect.poll(() => alertText(page)).toContain("This is a private key")
    expect(await saveButton(page).isDisabled()).toBe(true)

    await stageKey(service, publicKey.export({ type: "spki", format: "pem" }).toString())
    await service.getByText("Pending: new key credential").waitFor()
    expect(await service.textContent()).toContain("Public key: RSA.")
    await saveKeys(page, saves)
    const { e, kty, n } = publicKey.export({ format: "jwk" })
    expect(saves).toEqual([{
      changes: [{ op: "add_key_credential", environment: f.env, service_uuid: f.uuid, public_key: { kty, n, e } }]
    }])
    const listed = (await adminApi("GET", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`)).body.credentials
    const { client_id: clientId, public_key: info } = listed[0]
    // Without a kid of its own, the key's kid is its thumbprint: shown once.
    expect(info.kid).toBe(info.thumbprint)
    await expect.poll(() => credentialRow(service, clientId).textContent()).toContain(`Public key (RSA, no secret) · kid ${info.kid}`)

    const token = await keyToken(f, clientId, privateKey, "RS256")
    expect(token.status).toBe(200)
  })

  test("a save refused by the server (409 limit, network failure) keeps the staged changes", async () => {
    const f = await fixture("conflict")
    await apiCredential(f)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    await service.getByText("Pending: new credential").waitFor()

    // Someone else fills the second place meanwhile: the save fails whole with 409.
    await apiCredential(f)
    await saveButton(page).click()
    await expect.poll(() => alertText(page)).toMatch(/at most 2 credentials/)
    expect(await alertText(page)).toMatch(/still here/)
    expect(await service.getByText("Pending: new credential").isVisible()).toBe(true)
    expect(await saveButton(page).isEnabled()).toBe(true)
    expect(await page.getByLabel("Client secret", { exact: true }).count()).toBe(0)

    // The server cannot be reached: said in words, staged change still there.
    await page.route("**/admin/profiles/*/save", (route) => route.abort("connectionrefused"))
    await saveButton(page).click()
    await expect.poll(() => alertText(page)).toMatch(/server could not be reached/i)
    expect(await service.getByText("Pending: new credential").isVisible()).toBe(true)
    await page.unroute("**/admin/profiles/*/save")

    // A rejected admin token mid-session signs out and says why.
    await page.route("**/admin/profiles/*", (route) =>
      route.fulfill({
        status: 401,
        contentType: "application/json",
        body: JSON.stringify({ error: "unauthorized", error_description: "The admin token is not valid" })
      }))
    await page.getByRole("button", { name: "Refresh", exact: true }).click()
    await expect.poll(() => alertText(page)).toContain("Your admin token was rejected; sign in again")
    await page.getByLabel("Admin token", { exact: true }).waitFor()
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
  })

  test("cancelling a removal (Cancel or Escape) keeps the credential and returns focus", async () => {
    const f = await fixture("cancel")
    const live = await apiCredential(f)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    const remove = service.getByRole("button", { name: `Remove ${live.client_id}`, exact: true })
    const dialog = page.getByRole("dialog", { name: "Remove this credential?" })

    // Cancel button.
    await remove.click()
    await dialog.waitFor()
    expect(await dialog.textContent()).toContain(live.client_id)
    // Focus starts inside the dialog and Tab keeps it there.
    for (let i = 0; i < 5; i++) {
      expect(await dialog.evaluate((d) => d.contains(document.activeElement))).toBe(true)
      await page.keyboard.press(i % 2 ? "Shift+Tab" : "Tab")
    }
    expect(await dialog.evaluate((d) => d.contains(document.activeElement))).toBe(true)
    await dialog.getByRole("button", { name: "Cancel", exact: true }).click()
    await expect.poll(() => dialog.count()).toBe(0)
    expect(await activeElementLabel(page)).toBe(`Remove ${live.client_id}`)

    // Escape, opened from the keyboard.
    await remove.focus()
    await page.keyboard.press("Enter")
    await dialog.waitFor()
    await page.keyboard.press("Escape")
    await expect.poll(() => dialog.count()).toBe(0)
    expect(await activeElementLabel(page)).toBe(`Remove ${live.client_id}`)

    expect(await credentialRow(service, live.client_id).textContent()).not.toContain("pending removal")
    expect(await saveButton(page).isDisabled()).toBe(true)
    const doc = await adminApi("GET", `/admin/profiles/${f.profile}`)
    expect(doc.body.environments[0].services[0].credentials).toHaveLength(1)
  })

  test("a reload does not show the secret again, and it is never stored", async () => {
    const f = await fixture("reload")
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    const secret = await saveAndReadSecret(page)
    const storage = await page.evaluate(() => JSON.stringify({ s: { ...sessionStorage }, l: { ...localStorage } }))
    expect(storage).not.toContain(secret.clientSecret)
    expect(page.url()).not.toContain(secret.clientSecret)

    await page.reload()
    await page.getByRole("heading", { level: 1, name: f.profile, exact: true }).waitFor()
    await credentialRow(serviceRegion(page, f.serviceName), secret.clientId).waitFor()
    expect(await page.getByLabel("Client secret", { exact: true }).count()).toBe(0)
    expect(await page.content()).not.toContain(secret.clientSecret)
  })

  test("leaving with unsaved changes warns first", async () => {
    const f = await fixture("leave")
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    await service.getByText("Pending: new credential").waitFor()

    const beforeUnloadBlocked = await page.evaluate(() => {
      const event = new Event("beforeunload", { cancelable: true })
      window.dispatchEvent(event)
      return event.defaultPrevented
    })
    expect(beforeUnloadBlocked).toBe(true)

    const messages: Array<string> = []
    page.once("dialog", (d) => {
      messages.push(d.message())
      void d.dismiss()
    })
    await page.getByRole("link", { name: "All profiles" }).click()
    await expect.poll(() => messages.length).toBe(1)
    expect(messages[0]).toMatch(/unsaved changes/)
    expect(page.url()).toContain(`#/profiles/${f.profile}`)
    expect(await service.getByText("Pending: new credential").isVisible()).toBe(true)

    page.once("dialog", (d) => void d.accept())
    await page.getByRole("link", { name: "All profiles" }).click()
    await page.getByRole("heading", { level: 1, name: "Profiles" }).waitFor()
    expect(page.url()).toMatch(/#\/profiles$/)
  })

  test("creates a profile, an environment and a service from the page", async () => {
    const profile = `made-in-ui-${randomBytes(3).toString("hex")}`
    await signIn(page)
    await page.getByLabel("Profile name", { exact: true }).fill(profile)
    await page.getByRole("button", { name: "Create profile", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: profile, exact: true }).waitFor()
    expect(page.url()).toContain(`#/profiles/${profile}`)

    await page.getByLabel("Environment name", { exact: true }).fill("staging")
    await page.getByRole("button", { name: "Add environment", exact: true }).click()
    await page.getByRole("region", { name: "Environment staging" }).waitFor()

    // OAuth is proposed: an open service is a choice, never what a hurried click leaves.
    const auth = page.getByLabel("Authentication", { exact: true })
    expect(await auth.locator("option").allTextContents()).toEqual(["OAuth 2.0 (Client Credentials)", "None"])
    expect(await auth.locator("option").evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).toEqual([
      "oauth",
      "none"
    ])
    expect(await auth.inputValue()).toBe("oauth")
    await page.getByLabel("Service name", { exact: true }).fill("Search <b>API</b>")
    await auth.selectOption("none")
    await page.getByRole("button", { name: "Add service", exact: true }).click()
    // Names are shown as text, never as markup.
    const service = serviceRegion(page, "Search <b>API</b>")
    await service.waitFor()
    expect(await service.getByText("None", { exact: true }).count()).toBeGreaterThan(0)

    const doc = await adminApi("GET", `/admin/profiles/${profile}`)
    expect(doc.status).toBe(200)
    const created = doc.body.environments[0].services[0]
    expect(created).toMatchObject({ name: "Search <b>API</b>", auth_type: "none", credentials: [] })

    // Adding a credential switches the service to OAuth.
    await addButton(service).click()
    await saveAndReadSecret(page)
    await expect.poll(async () => (await service.getByText("OAuth 2.0 (Client Credentials)").count()) > 0).toBe(true)
  })

  test("screenshots at 1280 px and 390 px: readable, nothing overflows, the new secret shown whole", async () => {
    const f = await fixture("screens", "Billing API")
    const search = await addService(f, "Search API")
    const old = await apiCredential(f)
    await apiCredential(f)
    await apiCredential(search)
    expect((await requestToken(f, old.client_id, old.client_secret)).status).toBe(200)

    const stage = async (p: Page) => {
      await openEditor(p, f.profile)
      const billing = serviceRegion(p, f.serviceName)
      await billing.getByRole("button", { name: `Remove ${old.client_id}`, exact: true }).click()
      await p.getByRole("dialog").getByRole("button", { name: "Remove credential", exact: true }).click()
      await addButton(serviceRegion(p, search.serviceName)).click()
      await p.getByText("2 unsaved changes").waitFor()
    }

    const noOverflow = (p: Page) =>
      p.evaluate(() => ({
        page: document.documentElement.scrollWidth <= window.innerWidth,
        tables: Array.from(document.querySelectorAll(".table-wrap")).every((w) => w.scrollWidth <= w.clientWidth + 1)
      }))

    await stage(page)
    expect(await noOverflow(page)).toEqual({ page: true, tables: true })
    await page.screenshot({ path: join(RESULTS, "editor-1280.png"), fullPage: true })

    // The secret is shown whole, not cut off at its field's edge.
    const secretWhole = (p: Page) =>
      p.getByLabel("Client secret", { exact: true }).evaluate((field) =>
        field.scrollWidth <= field.clientWidth + 1 && field.scrollHeight <= field.clientHeight + 1
      )

    await newPage(390, 844)
    await page.goto(`${base}/admin`)
    await page.getByLabel("Admin token", { exact: true }).fill("wrong")
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await expect.poll(() => alertText(page)).toMatch(/rejected/)
    await page.screenshot({ path: join(RESULTS, "signin-390.png") })
    await stage(page)
    expect(await noOverflow(page)).toEqual({ page: true, tables: true })
    await page.screenshot({ path: join(RESULTS, "editor-390.png"), fullPage: true })
    await serviceRegion(page, search.serviceName).scrollIntoViewIfNeeded()
    await page.screenshot({ path: join(RESULTS, "editor-390-viewport.png") })

    await page.getByRole("button", { name: `Undo removal of ${old.client_id}` }).click()
    await saveAndReadSecret(page)
    expect(await noOverflow(page)).toEqual({ page: true, tables: true })
    expect(await secretWhole(page)).toBe(true)
    await page.screenshot({ path: join(RESULTS, "secret-390.png") })

    await serviceRegion(page, f.serviceName).getByRole("button", { name: `Remove ${old.client_id}` }).click()
    await page.getByRole("dialog").waitFor()
    await page.screenshot({ path: join(RESULTS, "dialog-390.png") })
  })
})

describe("history", () => {
  test("the profile's History shows a credential added and removed, newest first, with who did it", async () => {
    const f = await fixture("history")
    // A policy change: a label in the History, as every action, never its raw name.
    expect((await adminApi("PUT", `/admin/profiles/${f.profile}`, { credential_max_lifetime_days: 30 })).status).toBe(200)
    await signIn(page, ALICE_TOKEN, `#/profiles/${f.profile}`)
    await page.getByRole("heading", { level: 1, name: f.profile, exact: true }).waitFor()
    const history = page.getByRole("region", { name: "History", exact: true })
    const rows = () => history.getByRole("row").allTextContents()
    // The fixture was made through the API with ADMIN_TOKEN: actor admin.
    await expect.poll(async () => (await rows()).some((r) => r.includes("Service created") && r.includes("admin"))).toBe(true)
    await expect.poll(async () => (await rows()).some((r) => r.includes("Profile settings changed"))).toBe(true)
    const whats = await history.locator("td[data-label='What']").allTextContents()
    expect(whats.filter((what) => /\b[a-z_]+\.[a-z_]+\b/.test(what))).toEqual([])

    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    const added = await saveAndReadSecret(page)
    await page.getByRole("button", { name: "Dismiss", exact: true }).click()
    const addedRow = history.getByRole("row").filter({ hasText: "Credential added" }).filter({ hasText: added.clientId })
    await expect.poll(() => addedRow.count()).toBe(1)
    expect(await addedRow.textContent()).toContain("alice")
    // One column each for the environment and the service.
    expect(await history.getByRole("columnheader").allTextContents()).toEqual([
      "When",
      "Who",
      "What",
      "Environment",
      "Service",
      "Client ID"
    ])
    const cells = await addedRow.getByRole("cell").allTextContents()
    expect(cells.slice(3)).toEqual([f.env, f.serviceName, added.clientId])
    const created = history.getByRole("row").filter({ hasText: "Environment created" })
    expect((await created.getByRole("cell").allTextContents()).slice(3)).toEqual([f.env, "—", "—"])

    await service.getByRole("button", { name: `Remove ${added.clientId}`, exact: true }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove credential", exact: true }).click()
    await saveButton(page).click()
    const removedRow = history.getByRole("row").filter({ hasText: "Credential removed" }).filter({ hasText: added.clientId })
    await expect.poll(() => removedRow.count()).toBe(1)
    expect(await removedRow.textContent()).toContain("alice")

    // Newest first: the removal's save, the removal, the addition's save, the addition, the policy,
    // then the fixture's.
    const events = await history.locator("tbody tr td:nth-child(3)").allTextContents()
    expect(events).toEqual([
      "Profile saved",
      "Credential removed",
      "Profile saved",
      "Credential added",
      "Profile settings changed",
      "Service created",
      "Environment created",
      "Profile created"
    ])
    expect(await page.content()).not.toContain(added.clientSecret)
    expect(await page.content()).not.toContain(ALICE_TOKEN)
  })
})

describe("what a new operator met", () => {
  for (const [width, height] of [[1280, 900], [390, 844]] as const) {
    test(`at ${width} px: the sign-in names data/admin-token, the editor says what is saved when, the new credential is whole`, async () => {
      await newPage(width, height)
      const f = await fixture(`first-hour-${width}`)
      await page.goto(`${base}/admin`)
      expect(await page.getByText("data/admin-token", { exact: false }).first().isVisible()).toBe(true)
      await openEditor(page, f.profile)
      const rules = page.locator("#save-rules")
      expect(await rules.isVisible()).toBe(true)
      expect(await rules.textContent()).toBe(
        "Saved at once: environments and services you add or delete. " +
          "Saved with \u201cSave profile\u201d: credentials you add or remove, all together, so a rotation happens in one step."
      )
      await addButton(serviceRegion(page, f.serviceName)).click()
      const secret = await saveAndReadSecret(page)
      const field = page.getByLabel("Client secret", { exact: true })
      for (const shownField of [field, page.getByLabel("Client ID", { exact: true })]) {
        const shown = await shownField.evaluate((el) => ({
          whole: el.scrollWidth <= el.clientWidth + 1 && el.scrollHeight <= el.clientHeight + 1,
          inside: el.getBoundingClientRect().right <= window.innerWidth
        }))
        expect(shown).toEqual({ whole: true, inside: true })
      }
      expect(await field.inputValue()).toBe(secret.clientSecret)
      await page.screenshot({ path: join(RESULTS, `first-hour-secret-${width}.png`) })
    })
  }

  test("every page has an icon, and /favicon.ico answers it", async () => {
    const icon = await fetch(`${base}/favicon.ico`)
    expect(icon.status).toBe(200)
    expect(icon.headers.get("content-type")).toBe("image/svg+xml")
    expect(await icon.text()).toContain("<svg")
    for (const path of ["/admin", "/docs"]) {
      expect(await (await fetch(`${base}${path}`)).text()).toContain("<link rel=\"icon\" href=\"/admin/assets/favicon.svg\"")
    }
    const missing: Array<string> = []
    page.on("response", (response) => {
      if (response.status() === 404) missing.push(response.url())
    })
    await page.goto(`${base}/admin`)
    await page.getByLabel("Admin token", { exact: true }).waitFor()
    expect(missing).toEqual([])
  })

  test("the page is ES modules and stylesheets of under 400 lines each, all served", async () => {
    const dir = join(ROOT, "src/web/admin/assets")
    const names = (await readdir(dir)).filter((n) => /\.(js|css)$/.test(n))
    expect(names.length).toBeGreaterThan(5)
    for (const name of names) {
      const lines = (await readFile(join(dir, name), "utf8")).split("\n").length
      expect({ name, under400: lines <= 400 }).toEqual({ name, under400: true })
      const response = await fetch(`${base}/admin/assets/${name}`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain(name.endsWith(".js") ? "text/javascript" : "text/css")
    }
    expect(await (await fetch(`${base}/admin`)).text()).toContain("<script type=\"module\" src=\"/admin/assets/app.js\">")
    // No module fails to load in the browser (a missing export would stop the page).
    const errors: Array<string> = []
    page.on("pageerror", (e) => errors.push(e.message))
    await page.goto(`${base}/admin`)
    await page.getByLabel("Admin token", { exact: true }).waitFor()
    expect(errors).toEqual([])
  })

  test("/ lands on the editor, and the profiles page shows no stray null", async () => {
    await fixture("home")
    await page.goto(`${base}/`)
    await page.getByLabel("Admin token", { exact: true }).waitFor()
    expect(new URL(page.url()).pathname).toBe("/admin")
    await page.getByLabel("Admin token", { exact: true }).fill(ADMIN_TOKEN)
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Profiles" }).waitFor()
    await page.locator(".profile-list").waitFor()
    expect(await page.locator("main").textContent()).not.toMatch(/\bnull\b|\bundefined\b/)
    // The text nodes right under <main> are only whitespace (a null child used to print "null").
    const stray = await page.evaluate(() =>
      Array.from(document.getElementById("main")!.childNodes)
        .filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.trim() !== "")
        .map((n) => n.textContent)
    )
    expect(stray).toEqual([])
  })

  test("a 409 on save reloads the profile, so the page agrees with the error", async () => {
    const f = await fixture("reload409")
    const live1 = await apiCredential(f)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    await service.getByText("Pending: new credential").waitFor()
    const live2 = await apiCredential(f)
    expect(await credentialRow(service, live2.client_id).count()).toBe(0)

    await saveButton(page).click()
    await expect.poll(() => alertText(page)).toMatch(/at most 2 credentials/)
    expect(await alertText(page)).toMatch(/reloaded/)
    // Without pressing Refresh: both live credentials shown, the staged one still there, and the
    // service says it would go over the limit.
    await credentialRow(service, live2.client_id).waitFor()
    expect(await credentialRow(service, live1.client_id).count()).toBe(1)
    expect(await service.getByText("Pending: new credential").isVisible()).toBe(true)
    expect(await service.textContent()).toContain("Over the limit: saving would leave 3 credentials")
    expect(await addButton(service).isDisabled()).toBe(true)

    // Undoing the staged credential makes the page consistent with the server again.
    await service.getByRole("button", { name: "Undo new credential", exact: true }).click()
    await expect.poll(() => saveButton(page).isDisabled()).toBe(true)
    expect(await service.textContent()).toContain("Limit reached")
  })

  test("deletes an environment after a confirmation; Cancel keeps it", async () => {
    const f = await fixture("delenv")
    expect((await adminApi("PUT", `/admin/profiles/${f.profile}/environments/staging`, {})).status).toBe(201)
    const staging = await addService({ ...f, env: "staging" }, "Staging API")
    const cred = await apiCredential(staging)
    await openEditor(page, f.profile)
    const region = page.getByRole("region", { name: "Environment staging" })
    await region.waitFor()
    const remove = page.getByRole("button", { name: "Delete environment staging", exact: true })
    const dialog = page.getByRole("dialog", { name: "Delete this environment?" })

    await remove.click()
    await dialog.waitFor()
    expect(await dialog.textContent()).toContain("staging and its 1 service are deleted")
    expect(await dialog.textContent()).toContain("Its credential is deleted with it")
    await dialog.getByRole("button", { name: "Cancel", exact: true }).click()
    await expect.poll(() => dialog.count()).toBe(0)
    expect(await activeElementLabel(page)).toBe("Delete environment staging")
    expect((await adminApi("GET", `/admin/profiles/${f.profile}`)).body.environments).toHaveLength(2)

    await remove.click()
    await dialog.getByRole("button", { name: "Delete environment", exact: true }).click()
    await expect.poll(() => region.count()).toBe(0)
    await page.getByRole("region", { name: "Environment prod" }).waitFor()
    const doc = await adminApi("GET", `/admin/profiles/${f.profile}`)
    expect(doc.body.environments.map((e: any) => e.name)).toEqual(["prod"])
    expect((await requestToken(staging, cred.client_id, cred.client_secret)).status).toBe(400)
    // The new-service form no longer offers it.
    expect(await page.getByLabel("Environment", { exact: true }).locator("option").allTextContents()).toEqual(["prod"])
  })

  test("renames a service and sets its handler, keeping staged changes; then deletes it", async () => {
    const f = await fixture("settings", "Billing API")
    const other = await addService(f, "Search API")
    const cred = await apiCredential(f)
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(serviceRegion(page, other.serviceName)).click()
    await page.getByText("1 unsaved change").waitFor()

    await service.getByText("Edit service", { exact: true }).click()
    const name = service.getByLabel("Name", { exact: true })
    expect(await name.inputValue()).toBe(f.serviceName)
    const url = service.getByLabel("Proxy URL", { exact: true })
    expect(await url.isVisible()).toBe(false)
    await name.fill("Billing API v2")
    await service.getByLabel("Handler", { exact: true }).selectOption("proxy")
    await url.waitFor()
    await url.fill("https://upstream.example/api")
    await service.getByRole("button", { name: "Update service", exact: true }).click()

    const renamed = serviceRegion(page, "Billing API v2")
    await renamed.waitFor()
    expect(await renamed.textContent()).toContain("Proxy to https://upstream.example/api")
    let stored = (await adminApi("GET", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`)).body
    expect(stored).toMatchObject({
      name: "Billing API v2",
      auth_type: "oauth",
      handler: { type: "proxy", url: "https://upstream.example/api" }
    })
    expect(stored.credentials).toHaveLength(1)
    // The staged credential of the other service is still staged.
    expect(await page.getByText("1 unsaved change").count()).toBe(1)

    // Back to echo.
    await renamed.getByText("Edit service", { exact: true }).click()
    await renamed.getByLabel("Handler", { exact: true }).selectOption("echo")
    await renamed.getByRole("button", { name: "Update service", exact: true }).click()
    await expect.poll(() => renamed.textContent()).toContain("Echo (answers with the request)")
    stored = (await adminApi("GET", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`)).body
    expect(stored.handler).toEqual({ type: "echo" })

    // Delete, confirmed; its credential dies with it.
    await renamed.getByText("Edit service", { exact: true }).click()
    await renamed.getByRole("button", { name: "Delete service", exact: true }).click()
    const dialog = page.getByRole("dialog", { name: "Delete this service?" })
    await dialog.waitFor()
    expect(await dialog.textContent()).toContain("Billing API v2")
    expect(await dialog.textContent()).toContain("Its credential is deleted with it")
    await dialog.getByRole("button", { name: "Delete service", exact: true }).click()
    await expect.poll(() => renamed.count()).toBe(0)
    const doc = await adminApi("GET", `/admin/profiles/${f.profile}`)
    expect(doc.body.environments[0].services.map((s: any) => s.name)).toEqual(["Search API"])
    expect((await requestToken(f, cred.client_id, cred.client_secret)).status).toBe(400)
    expect(await page.getByText("1 unsaved change").count()).toBe(1)
  })

  test("the client id has Copy buttons, in the new-secret panel and in the table", async () => {
    const f = await fixture("copyid")
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addButton(service).click()
    const { clientId, clientSecret } = await saveAndReadSecret(page)
    await page.getByRole("button", { name: "Copy client ID", exact: true }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(clientId)
    await page.getByRole("button", { name: "Copy", exact: true }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(clientSecret)
    await page.getByRole("button", { name: "Dismiss", exact: true }).click()

    await page.evaluate(() => navigator.clipboard.writeText(""))
    await service.getByRole("button", { name: `Copy client ID ${clientId}`, exact: true }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(clientId)
    await expect.poll(() => page.getByRole("status").textContent()).toContain("Client ID copied")
  })

  test("the header stays on one line at 390 px", async () => {
    await newPage(390, 844)
    await signIn(page)
    await page.getByRole("heading", { level: 1, name: "Profiles" }).waitFor()
    const layout = await page.evaluate(() => {
      const box = (selector: string) => document.querySelector(selector)!.getBoundingClientRect()
      const brand = box(".brand")
      const signOut = box("#sign-out")
      const style = getComputedStyle(document.querySelector(".brand")!)
      return {
        topbar: box(".topbar").height,
        brandHeight: brand.height,
        lineHeight: parseFloat(style.lineHeight) || 24,
        separate: brand.right <= signOut.left,
        sameRow: Math.abs(brand.top + brand.height / 2 - (signOut.top + signOut.height / 2)) < 4,
        fits: document.documentElement.scrollWidth <= window.innerWidth && signOut.right <= window.innerWidth
      }
    })
    expect(layout.brandHeight).toBeLessThanOrEqual(layout.lineHeight + 1)
    expect(layout.topbar).toBeLessThan(64)
    expect(layout).toMatchObject({ separate: true, sameRow: true, fits: true })
    await page.screenshot({ path: join(RESULTS, "header-390.png") })
  })
})

describe("expiry and rate limits", () => {
  test("marks credentials that expire within 30 days and expired ones; sets the lifetime policy and a rate limit", async () => {
    const f = await fixture("expiry", "Billing API")
    const credentials = `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}/credentials`
    const soon = await adminApi("POST", credentials, { expires_at: new Date(Date.now() + 5 * 86_400_000).toISOString() })
    expect(soon.status).toBe(201)
    const expiring = await adminApi("POST", credentials, { expires_at: new Date(Date.now() + 1_500).toISOString() })
    expect(expiring.status).toBe(201)
    await new Promise((resolve) => setTimeout(resolve, 1_600))
    await openEditor(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    expect(await credentialRow(service, soon.body.client_id).textContent()).toContain("expires within 30 days")
    expect(await credentialRow(service, expiring.body.client_id).textContent()).toContain("expired")

    // The profile's policy, set at once.
    await page.getByLabel("Maximum lifetime (days, empty: none)").fill("90")
    await page.getByRole("button", { name: "Set", exact: true }).click()
    await expect.poll(async () => (await adminApi("GET", `/admin/profiles/${f.profile}`)).body.credential_max_lifetime_days).toBe(90)
    await page.getByText("New credentials expire within 90 days.").waitFor()

    // The service's rate limit, kept by a later update that does not touch it.
    await service.getByText("Edit service", { exact: true }).click()
    await service.getByLabel("Rate limit: calls per client", { exact: true }).fill("100")
    // Only the calls: the window is told it is missing, on the window field; nothing is sent.
    await service.getByRole("button", { name: "Update service", exact: true }).click()
    const windowField = service.getByLabel("Rate limit: window (seconds)", { exact: true })
    const callsField = service.getByLabel("Rate limit: calls per client", { exact: true })
    await expect.poll(() => windowField.evaluate((el) => (el as HTMLInputElement).validationMessage))
      .toBe("The window must be a whole number of seconds from 1 to 3600.")
    expect(await callsField.evaluate((el) => (el as HTMLInputElement).validationMessage)).toBe("")
    const servicePath = `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`
    expect((await adminApi("GET", servicePath)).body.rate_limit ?? null).toBeNull()
    // Typed into by real keystrokes, the window clears the message and Update sends.
    await windowField.pressSequentially("60")
    expect(await windowField.evaluate((el) => (el as HTMLInputElement).validationMessage)).toBe("")
    await service.getByRole("button", { name: "Update service", exact: true }).click()
    await expect.poll(async () => (await adminApi("GET", servicePath)).body.rate_limit).toEqual({ requests: 100, per_seconds: 60 })
    await expect.poll(() => serviceRegion(page, f.serviceName).textContent()).toContain("100 calls per 60 s for each client")
    const again = serviceRegion(page, f.serviceName)
    await again.getByText("Edit service", { exact: true }).click()
    await again.getByLabel("Name", { exact: true }).fill("Billing API")
    await again.getByRole("button", { name: "Update service", exact: true }).click()
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect((await adminApi("GET", servicePath)).body.rate_limit).toEqual({ requests: 100, per_seconds: 60 })

    // require_dpop: a checkbox, kept by a later update that does not touch it.
    const third = serviceRegion(page, f.serviceName)
    await third.getByText("Edit service", { exact: true }).click()
    await third.getByLabel("Require DPoP-bound tokens", { exact: true }).check()
    await third.getByRole("button", { name: "Update service", exact: true }).click()
    await expect.poll(async () => (await adminApi("GET", servicePath)).body.require_dpop).toBe(true)
    await expect.poll(() => serviceRegion(page, f.serviceName).textContent()).toContain("DPoP-bound only (Bearer refused)")
    const fourth = serviceRegion(page, f.serviceName)
    await fourth.getByText("Edit service", { exact: true }).click()
    expect(await fourth.getByLabel("Require DPoP-bound tokens", { exact: true }).isChecked()).toBe(true)
    await fourth.getByLabel("Name", { exact: true }).fill("Billing API")
    await fourth.getByRole("button", { name: "Update service", exact: true }).click()
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect((await adminApi("GET", servicePath)).body).toMatchObject({ require_dpop: true, rate_limit: { requests: 100, per_seconds: 60 } })
  })
})
