/**
 * What a new operator met in the editor, in a real Chromium against the real server: the sign-in
 * names where the admin token is, the editor says what is saved when, icons and assets are served,
 * deletions ask first, and the layout holds at 390 px.
 */
import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, test } from "vitest"
import {
  activeElementLabel,
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
import { ADMIN_TOKEN, adminApi, base, newPage, page, RESULTS, signIn, useEditorServer } from "./support/EditorServer.js"

const ROOT = fileURLToPath(new URL("../../", import.meta.url))

useEditorServer({ name: "editor", pagePerTest: true })

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
