/**
 * The profile editor's credentials at /admin, in a real Chromium against the real server: rotation,
 * the two-credential limit, key credentials pasted as JWK or PEM, a refused save, a cancelled
 * removal, a secret shown once, and unsaved changes. Driven only by labels, roles and names.
 */
import { generateKeyPairSync } from "node:crypto"
import { describe, expect, test } from "vitest"
import {
  activeElementLabel,
  addButton,
  alertText,
  apiCredential,
  callService,
  credentialRow,
  fixture,
  keyToken,
  openEditor,
  recordSaves,
  requestToken,
  saveAndReadSecret,
  saveButton,
  saveKeys,
  serviceRegion,
  stageKey
} from "./support/EditorFixtures.js"
import { ADMIN_TOKEN, adminApi, base, page, signIn, useEditorServer } from "./support/EditorServer.js"

useEditorServer({ name: "editor", pagePerTest: true })

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
})
