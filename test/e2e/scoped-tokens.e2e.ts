/**
 * The editor with scoped admin tokens, in a real Chromium against the real server: an owner sees
 * only its profiles and no profile creation, a viewer sees no change control, and an admin creates
 * a token on the "Admin tokens" page (shown once, copied), then revokes it.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, test } from "vitest"
import { givenCredential as givenProfile } from "./support/EditorFixtures.js"
import { ADMIN_TOKEN, adminApi, base, page, signIn as signInAt, useEditorServer } from "./support/EditorServer.js"

useEditorServer({ name: "scoped", pagePerTest: true })

async function givenToken(role: "owner" | "viewer", profiles: ReadonlyArray<string>) {
  const created = await adminApi("POST", "/admin/tokens", { name: `${role}-${randomBytes(3).toString("hex")}`, role, profiles })
  expect(created.status).toBe(201)
  return created.body.token as string
}

const signIn = (token: string, hash = "#/profiles") => signInAt(page, token, hash)

describe("the editor with scoped admin tokens", () => {
  test("an owner sees only its profiles, changes them, and may not create profiles", async () => {
    const own = await givenProfile("own")
    const other = await givenProfile("other")
    await signIn(await givenToken("owner", [own.profile]))
    await page.getByRole("heading", { level: 2, name: "Your profiles" }).waitFor()
    await page.getByRole("link", { name: own.profile, exact: true }).waitFor()
    expect(await page.getByRole("link", { name: other.profile, exact: true }).count()).toBe(0)
    expect(await page.getByRole("button", { name: "Create profile" }).count()).toBe(0)
    expect(await page.getByRole("link", { name: "Admin tokens" }).count()).toBe(0)

    await page.getByRole("link", { name: own.profile, exact: true }).click()
    await page.getByRole("heading", { level: 1, name: own.profile, exact: true }).waitFor()
    await page.getByRole("button", { name: "Add credential", exact: true }).waitFor()
    await page.getByRole("button", { name: "Save profile", exact: true }).waitFor()
    // The credential lifetime is shown, not offered: setting it is an admin's.
    await page.getByText("New credentials never expire unless given an expiry.").waitFor()
    expect(await page.getByLabel("Maximum lifetime", { exact: false }).count()).toBe(0)
    expect(await page.getByRole("button", { name: "Set", exact: true }).count()).toBe(0)

    // Another profile's address shows what a missing profile shows.
    await page.goto(`${base}/admin#/profiles/${other.profile}`)
    await page.getByText("could not find", { exact: false }).or(page.getByText("not found", { exact: false })).first().waitFor()
    expect(await page.getByRole("button", { name: "Add credential" }).count()).toBe(0)
  })

  test("signing out on the admin's tokens page and in as an owner shows the profiles, not \"Page not found\"", async () => {
    const own = await givenProfile("after")
    await signIn(ADMIN_TOKEN, "#/tokens")
    await page.getByRole("heading", { level: 1, name: "Admin tokens" }).waitFor()
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByLabel("Admin token", { exact: true }).fill(await givenToken("owner", [own.profile]))
    await page.getByRole("button", { name: "Sign in", exact: true }).click()
    await page.getByRole("link", { name: own.profile, exact: true }).waitFor()
    expect(await page.getByRole("heading", { name: "Page not found" }).count()).toBe(0)
    expect(new URL(page.url()).hash).toBe("#/profiles")
    await expect.poll(() => page.getByRole("status").textContent()).toBe("Signed in.")
  })

  test("a viewer reads its profile without a single change control", async () => {
    const own = await givenProfile("read")
    await signIn(await givenToken("viewer", [own.profile]), `#/profiles/${own.profile}`)
    await page.getByRole("heading", { level: 1, name: own.profile, exact: true }).waitFor()
    await page.getByText(own.clientId).first().waitFor()
    await page.getByText("Your admin token may read this profile, not change it.").waitFor()
    for (
      const name of [
        "Add credential",
        "Save profile",
        "Delete environment",
        "Add environment",
        "Add service",
        "Update service",
        "Delete service"
      ]
    ) {
      expect([name, await page.getByRole("button", { name }).count()]).toEqual([name, 0])
    }
    expect(await page.getByRole("button", { name: `Remove ${own.clientId}` }).count()).toBe(0)
  })

  test("an admin creates a token, shown once with a copy button, that works; then revokes it", async () => {
    const own = await givenProfile("tokens")
    await signIn(ADMIN_TOKEN)
    await page.getByRole("link", { name: "Admin tokens" }).click()
    await page.getByRole("heading", { level: 1, name: "Admin tokens" }).waitFor()
    await page.getByLabel("Name", { exact: true }).fill("team-acme")
    await page.getByLabel("Role", { exact: true }).selectOption("owner")
    await page.getByLabel("Profiles", { exact: true }).fill(own.profile)
    await page.getByRole("button", { name: "Create token", exact: true }).click()

    const field = page.getByLabel("Admin token", { exact: true })
    await field.waitFor()
    await page.getByText("This token will not be shown again").waitFor()
    const token = await field.inputValue()
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    await page.getByRole("button", { name: "Copy", exact: true }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(token)
    expect((await adminApi("GET", "/admin/session", undefined, token)).body).toEqual({
      name: "team-acme",
      role: "owner",
      profiles: [own.profile]
    })

    await page.getByRole("row").filter({ hasText: "team-acme" }).waitFor()
    await page.getByRole("button", { name: "Dismiss", exact: true }).click()
    expect(await page.content()).not.toContain(token)

    await page.getByRole("button", { name: "Revoke team-acme", exact: true }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Revoke token", exact: true }).click()
    await expect.poll(() => page.getByRole("status").textContent()).toContain("revoked")
    expect((await adminApi("GET", "/admin/session", undefined, token)).status).toBe(401)
  })
})
