/**
 * The profile editor at /admin, in a real Chromium against the real server (a child process with a
 * fresh data directory): profiles made from the page, its screenshots at two widths, the History,
 * and credential expiry and rate limits. Fixtures are set up through the admin JSON API; the page is
 * driven only by labels, roles and button names, as a person with a keyboard or a screen reader would.
 */
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import type { Page } from "playwright-core"
import { describe, expect, test } from "vitest"
import {
  addButton,
  addService,
  alertText,
  apiCredential,
  credentialRow,
  fixture,
  openEditor,
  requestToken,
  saveAndReadSecret,
  saveButton,
  serviceRegion
} from "./support/EditorFixtures.js"
import { adminApi, base, newPage, page, RESULTS, signIn, useEditorServer } from "./support/EditorServer.js"

/** A named admin token (ADMIN_TOKENS): the history shows its name. */
const ALICE_TOKEN = randomBytes(24).toString("base64url")

useEditorServer({ name: "editor", env: { ADMIN_TOKENS: `alice:${ALICE_TOKEN}` }, pagePerTest: true })

describe("profile editor", () => {
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
