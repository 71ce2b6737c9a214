/**
 * What a newcomer sees in a service's card, at a desktop width (1280 px) and a phone's (390 px), in a
 * real Chromium against the real server: "Require DPoP-bound tokens" is a checkbox beside its label;
 * "Add a public key" opens without a blank gap and its disabled button says why; a client id reads
 * on one line; a new credential's expiry says it is local time and what empty means; the History
 * names every action in words.
 */
import type { Locator, Page } from "playwright-core"
import { describe, expect, test } from "vitest"
import { givenCredential as givenService } from "./support/EditorFixtures.js"
import { adminApi, newPage as openPage, signIn, useEditorServer } from "./support/EditorServer.js"

const WIDTHS = [1280, 390] as const

useEditorServer({ name: "first-hour" })

async function openProfile(page: Page, profile: string) {
  await signIn(page, undefined, `#/profiles/${profile}`)
  await page.getByRole("heading", { level: 1, name: profile, exact: true }).waitFor()
}

const serviceRegion = (page: Page) => page.getByRole("region", { name: "Billing API", exact: true })

async function box(locator: Locator) {
  const found = await locator.boundingBox()
  expect(found).not.toBeNull()
  return found!
}

describe("a service's card for a newcomer", () => {
  for (const width of WIDTHS) {
    test(`at ${width} px: the DPoP checkbox is a box beside its label`, async () => {
      const page = await openPage(width)
      const f = await givenService("dpop")
      await openProfile(page, f.profile)
      await serviceRegion(page).getByText("Edit service", { exact: true }).click()
      const checkbox = page.getByRole("checkbox", { name: "Require DPoP-bound tokens", exact: true })
      const label = page.locator("label").filter({ has: checkbox })
      const [check, line] = [await box(checkbox), await box(label)]
      // A box the size of a letter, not a 512×42 field.
      expect(check.width).toBeLessThanOrEqual(24)
      expect(check.height).toBeLessThanOrEqual(24)
      // Beside its words, on one line: the label is one line high and the box sits in it, left of the text.
      expect(line.height).toBeLessThan(32)
      expect(check.y).toBeGreaterThanOrEqual(line.y - 1)
      expect(check.y + check.height).toBeLessThanOrEqual(line.y + line.height + 1)
      expect(check.x).toBeLessThan(line.x + 4)
      expect(line.width).toBeGreaterThan(check.width + 100)
      // It still works as a checkbox.
      await checkbox.check()
      expect(await checkbox.isChecked()).toBe(true)
    })

    test(`at ${width} px: "Add a public key" opens on its form, and its disabled button says why`, async () => {
      const page = await openPage(width)
      const f = await givenService("keys")
      await openProfile(page, f.profile)
      const service = serviceRegion(page)
      const summary = service.getByText("Add a public key", { exact: true })
      await summary.click()
      const field = service.getByLabel("Public key (JWK or PEM)", { exact: true })
      await field.waitFor()
      const stage = service.getByRole("button", { name: "Stage key credential", exact: true })
      // No blank gap: the field's hint is as tall as its text, and the button follows it.
      const hint = page.locator(`#${await field.getAttribute("aria-describedby")}`)
      const [explained, button] = [await box(hint), await box(stage)]
      const blank = await hint.evaluate((el) => {
        const text = document.createRange()
        text.selectNodeContents(el)
        return el.getBoundingClientRect().height - text.getBoundingClientRect().height
      })
      expect(blank).toBeLessThan(12)
      expect(button.y - (explained.y + explained.height)).toBeLessThan(24)

      expect(await stage.isDisabled()).toBe(true)
      const why = "Paste a public key above to stage it."
      expect(await stage.getAttribute("aria-describedby")).toBeTruthy()
      expect(await page.locator(`#${await stage.getAttribute("aria-describedby")}`).textContent()).toBe(why)
      expect(await service.getByText(why, { exact: true }).isVisible()).toBe(true)
      // The button and its reason sit close together.
      const reason = await box(service.getByText(why, { exact: true }))
      expect(Math.abs(reason.y - button.y)).toBeLessThan(button.height + 40)

      await field.fill("{\"kty\":\"EC\"}")
      expect(await stage.isDisabled()).toBe(false)
      expect(await service.getByText(why, { exact: true }).isVisible()).toBe(false)
      await field.fill("")
      expect(await stage.isDisabled()).toBe(true)

      // At the limit of two, the reason is the limit.
      await adminApi("POST", `${f.servicePath}/credentials`, {})
      await page.getByRole("button", { name: "Refresh", exact: true }).click()
      await expect.poll(() => serviceRegion(page).locator("code.client-id").count()).toBe(2)
      if (!(await field.isVisible())) await serviceRegion(page).getByText("Add a public key", { exact: true }).click()
      await field.fill("{\"kty\":\"EC\"}")
      expect(await stage.isDisabled()).toBe(true)
      expect(await serviceRegion(page).getByText("remove one to add a key", { exact: false }).isVisible()).toBe(true)
    })

    test(`at ${width} px: a client id reads on one line; a new credential's expiry says local time and what empty means`, async () => {
      const page = await openPage(width)
      const f = await givenService("ids")
      await openProfile(page, f.profile)
      const service = serviceRegion(page)
      const id = service.locator("code.client-id", { hasText: f.clientId })
      const shown = await box(id)
      const lineHeight = await id.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight))
      expect(shown.height).toBeLessThan(lineHeight * 1.5 + 4)
      expect(await id.evaluate((el) => getComputedStyle(el).whiteSpace)).toBe("nowrap")
      expect(await id.evaluate((el) => getComputedStyle(el).fontFamily)).toMatch(/mono/i)
      // At a desktop width it fits whole: nothing to scroll.
      if (width === 1280) expect(await id.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true)

      await service.getByRole("button", { name: "Add credential", exact: true }).click()
      const expiry = service.getByLabel(/^Expiry of new credential/)
      const hint = "Your local time; empty: the profile's policy, or never."
      expect(await service.getByText(hint, { exact: true }).isVisible()).toBe(true)
      const describedBy = await expiry.getAttribute("aria-describedby")
      expect(await page.locator(`#${describedBy}`).textContent()).toBe(hint)
    })
  }

  test("the History names every action in words, none by its raw name", async () => {
    const page = await openPage(1280)
    const f = await givenService("history")
    expect((await adminApi("PUT", `/admin/profiles/${f.profile}`, { credential_max_lifetime_days: 30 })).status).toBe(200)
    const allowed = await adminApi("PUT", `${f.servicePath}/credentials/${f.clientId}/introspect_profiles`, {
      introspect_profiles: [f.profile]
    })
    expect(allowed.status).toBe(200)
    await openProfile(page, f.profile)
    const history = page.getByRole("region", { name: "History", exact: true })
    const whats = () => history.locator("td[data-label='What']").allTextContents()
    await expect.poll(async () => (await whats()).length).toBeGreaterThanOrEqual(5)
    expect(await whats()).toContain("Credential's introspection permission changed")
    expect(await whats()).toContain("Profile settings changed")
    expect((await whats()).filter((what) => /\b[a-z_]+\.[a-z_]+\b/.test(what))).toEqual([])
  })
})
