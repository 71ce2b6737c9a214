/**
 * Workload identity federation in the profile editor, in a real Chromium against the real server: an
 * admin registers, changes and deletes a trusted issuer on its page; a federated credential is added
 * to a service, listed with its issuer and subject, used by a workload's token, and removed; an
 * owner is told why it cannot manage issuers and adds a credential by the issuer's name. Driven only
 * by labels, roles and names.
 */
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import type { Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { startWorkloadIssuer, type WorkloadIssuer } from "../support/WorkloadIssuer.js"
import {
  alertText,
  credentialRow,
  type Fixture,
  fixture,
  recordSaves,
  saveKeys,
  serviceRegion,
  servicePathOf,
  tokenFor
} from "./support/EditorFixtures.js"
import { adminApi, base, newPage, page, RESULTS, signIn, useEditorServer } from "./support/EditorServer.js"

useEditorServer({ name: "federation", pagePerTest: true })

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
const SUBJECT = "repo:acme/billing:environment:production"

let workload: WorkloadIssuer
beforeAll(async () => {
  workload = await startWorkloadIssuer({ alg: "ES256", path: "actions" })
})
afterAll(async () => {
  await workload?.close()
})

/** This server's issuer identifier: the audience a trusted issuer's tokens carry by default. */
const serverIssuer = async () =>
  ((await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as { issuer: string }).issuer

/** The workload's token for the fixture's federated credential, at the token endpoint. */
async function federatedToken(f: Fixture, clientId: string, claims: Record<string, unknown>) {
  const now = Math.floor(Date.now() / 1000)
  const assertion = await workload.sign({ sub: SUBJECT, aud: await serverIssuer(), iat: now, exp: now + 300, ...claims })
  return tokenFor(f, { client_id: clientId, client_assertion_type: JWT_BEARER, client_assertion: assertion })
}

const issuerRow = (p: Page, name: string) => p.getByRole("row").filter({ has: p.getByText(name, { exact: true }) })

/** Registers an issuer through the API (not through the page). */
async function apiIssuer(name: string, profiles: Array<string>) {
  const created = await adminApi("POST", "/admin/trusted-issuers", {
    name,
    issuer: workload.url,
    profiles,
    allow_insecure_loopback: true
  })
  expect(created.status).toBe(201)
}

/** Opens a service's federated credential form, fills it and submits it. */
async function addFederated(service: Locator, issuer: string, options: { claims?: Record<string, string>; expires?: string } = {}) {
  const field = service.getByLabel("Trusted issuer", { exact: true })
  // The form stays open after a refusal, and closes once the server took it.
  if (!(await field.isVisible())) await service.getByText("Add a federated credential", { exact: true }).click()
  if ((await field.evaluate((el) => el.tagName)) === "SELECT") await field.selectOption(issuer)
  else await field.fill(issuer)
  await service.getByLabel("Subject", { exact: true }).fill(SUBJECT)
  for (const [index, [name, value]] of Object.entries(options.claims ?? {}).entries()) {
    await service.getByRole("button", { name: "Add claim", exact: true }).click()
    await service.getByLabel(`Claim ${index + 1} name`, { exact: true }).fill(name)
    await service.getByLabel(`Claim ${index + 1} value`, { exact: true }).fill(value)
  }
  if (options.expires !== undefined) await service.getByLabel("Expires (optional)", { exact: true }).fill(options.expires)
  await service.getByRole("button", { name: "Add federated credential", exact: true }).click()
}

/** The client id of the one federated credential the service lists. */
async function federatedClientId(f: Fixture): Promise<string> {
  let clientId = ""
  await expect.poll(async () => {
    const listed = await adminApi("GET", `${servicePathOf(f)}/credentials`)
    clientId = listed.body.credentials.find((c: any) => c.federated !== undefined)?.client_id ?? ""
    return clientId
  }).toMatch(/^svc_[0-9a-f]{32}$/)
  return clientId
}

/** Goes to a profile in the editor, signed in already. */
async function openProfile(p: Page, profile: string) {
  await p.goto(`${base}/admin#/profiles/${profile}`)
  await p.getByRole("heading", { level: 1, name: profile, exact: true }).waitFor()
}

/** Nothing wider than the window: no sideways scrolling at 1280 px. */
const noSidewaysScroll = (p: Page) => p.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)

describe("trusted issuers and federated credentials in the editor", () => {
  test("an admin registers an issuer, adds a federated credential its workload uses, and removes both", async () => {
    const f = await fixture("fed")
    const name = `actions-${randomBytes(3).toString("hex")}`
    await signIn(page)
    await page.getByRole("link", { name: f.profile, exact: true }).waitFor()
    await page.locator(".page-head").screenshot({ path: join(RESULTS, "federation-profiles-head-1280.png") })
    await page.getByRole("link", { name: "Trusted issuers", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Trusted issuers" }).waitFor()

    // 1. Register it: discovery on loopback, two algorithms, the profile.
    await page.getByLabel("Name", { exact: true }).fill(name)
    await page.getByLabel("Issuer URL", { exact: true }).fill(workload.url)
    expect(await page.getByLabel("Fetch them through the issuer's discovery document").isChecked()).toBe(true)
    expect(await page.getByLabel("JWKS (public keys)", { exact: true }).isVisible()).toBe(false)
    await page.getByLabel("EdDSA (Ed25519)").uncheck()
    await page.getByLabel("RS256 (RSA)").uncheck()
    await page.getByLabel("Profiles", { exact: true }).fill(f.profile)
    await page.getByLabel("Allow plain http: on a loopback host").check()
    await page.getByRole("button", { name: "Register issuer", exact: true }).click()
    await expect.poll(() => issuerRow(page, name).count()).toBe(1)
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).body).toMatchObject({
      name,
      issuer: workload.url,
      audience: await serverIssuer(),
      algorithms: ["ES256"],
      max_token_lifetime_seconds: 3600,
      profiles: [f.profile],
      allow_insecure_loopback: true
    })
    expect(await issuerRow(page, name).textContent()).toContain("Discovery")

    // 2. Change it: the form is filled with what is stored; the lifetime changes, nothing else.
    await page.getByRole("button", { name: `Change ${name}`, exact: true }).click()
    await page.getByRole("heading", { name: `Change issuer ${name}` }).waitFor()
    expect(await page.getByLabel("Issuer URL", { exact: true }).inputValue()).toBe(workload.url)
    expect(await page.getByLabel("ES256 (EC P-256)").isChecked()).toBe(true)
    expect(await page.getByLabel("RS256 (RSA)").isChecked()).toBe(false)
    await page.getByLabel("Longest token lifetime (seconds)", { exact: true }).fill("600")
    await page.getByRole("button", { name: "Save issuer", exact: true }).click()
    await expect.poll(() => issuerRow(page, name).textContent()).toContain("at most 600 s")
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).body).toMatchObject({
      algorithms: ["ES256"],
      max_token_lifetime_seconds: 600,
      profiles: [f.profile]
    })
    expect(await noSidewaysScroll(page)).toBe(true)
    await page.screenshot({ path: join(RESULTS, "federation-issuers-1280.png"), fullPage: true })

    // 3. A federated credential on the service: the issuer picked, the subject and one claim.
    await openProfile(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addFederated(service, name, { claims: { repository: "acme/billing" } })
    const clientId = await federatedClientId(f)
    const row = credentialRow(service, clientId)
    await expect.poll(() => row.textContent()).toContain(`Federated (no secret) · issuer ${name} · subject ${SUBJECT}`)
    expect(await row.textContent()).toContain("claims repository = acme/billing")
    expect(await row.textContent()).not.toMatch(/thumbprint|Public key/)
    expect(await row.getByText("Never", { exact: true }).count()).toBe(1)
    expect(await page.getByLabel("Client secret", { exact: true }).count()).toBe(0)
    // The form was emptied and closed once the server took it.
    expect(await service.getByLabel("Subject", { exact: true }).isVisible()).toBe(false)

    // Its workload's token gets an access token (and a token without the claim does not); the
    // list's "Last used" shows it after a refresh.
    expect((await federatedToken(f, clientId, {})).status).toBe(401)
    const issued = await federatedToken(f, clientId, { repository: "acme/billing" })
    expect(issued.status).toBe(200)
    await page.getByRole("button", { name: "Refresh", exact: true }).click()
    await expect.poll(() => row.locator("td").nth(2).textContent()).not.toContain("never")

    // 4. The issuer cannot be deleted while the credential lives: the server's reason is shown.
    await page.goto(`${base}/admin#/issuers`)
    await issuerRow(page, name).waitFor()
    await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click()
    await page.getByRole("dialog", { name: "Delete this trusted issuer?" }).getByRole("button", { name: "Delete issuer" }).click()
    await expect.poll(() => alertText(page)).toContain(
      `Trusted issuer ${name} was not deleted: The trusted issuer ${name} is used by live federated credentials: ${clientId}; delete them first.`
    )
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).status).toBe(200)

    // 5. The credential is removed as any other: staged, then saved.
    await page.goto(`${base}/admin#/profiles/${f.profile}`)
    const saves = recordSaves(page)
    await credentialRow(serviceRegion(page, f.serviceName), clientId).waitFor()
    await serviceRegion(page, f.serviceName).getByRole("button", { name: `Remove ${clientId}`, exact: true }).click()
    await page.getByRole("dialog", { name: "Remove this credential?" }).getByRole("button", { name: "Remove credential" }).click()
    await saveKeys(page, saves)
    expect(saves).toEqual([{ changes: [{ op: "remove_credential", environment: f.env, service_uuid: f.uuid, client_id: clientId }] }])
    await expect.poll(() => credentialRow(serviceRegion(page, f.serviceName), clientId).count()).toBe(0)
    expect((await federatedToken(f, clientId, { repository: "acme/billing" })).status).toBe(401)

    // 6. Now the issuer goes.
    await page.goto(`${base}/admin#/issuers`)
    await issuerRow(page, name).waitFor()
    await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click()
    await page.getByRole("dialog", { name: "Delete this trusted issuer?" }).getByRole("button", { name: "Delete issuer" }).click()
    await expect.poll(() => issuerRow(page, name).count()).toBe(0)
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).status).toBe(404)
  })

  test("an inline JWKS is registered as pasted; a credential's expiry is sent in UTC", async () => {
    const f = await fixture("fed-inline")
    const name = `pasted-${randomBytes(3).toString("hex")}`
    await signIn(page, undefined, "#/issuers")
    await page.getByRole("heading", { level: 1, name: "Trusted issuers" }).waitFor()
    await page.getByLabel("Name", { exact: true }).fill(name)
    await page.getByLabel("Issuer URL", { exact: true }).fill("https://oidc.private.example")
    await page.getByLabel("Paste them (an issuer this server cannot reach)").check()
    const jwks = page.getByLabel("JWKS (public keys)", { exact: true })
    // Plainly wrong: said at once, nothing sent.
    await jwks.fill("{\"keys\": []}")
    await page.getByRole("button", { name: "Register issuer", exact: true }).click()
    await expect.poll(() => alertText(page)).toContain("The JWKS holds no key.")
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).status).toBe(404)
    // The server's own refusal, in words.
    await jwks.fill(JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0" }] }))
    await page.getByRole("button", { name: "Register issuer", exact: true }).click()
    await expect.poll(() => alertText(page)).toMatch(/Could not register trusted issuer .* \(jwks\.keys\.0: /)
    await jwks.fill(JSON.stringify(workload.jwks()))
    await page.getByLabel("Profiles", { exact: true }).fill(f.profile)
    await page.getByRole("button", { name: "Register issuer", exact: true }).click()
    await expect.poll(() => issuerRow(page, name).count()).toBe(1)
    expect(await issuerRow(page, name).textContent()).toContain("Inline JWKS (1 key)")
    expect((await adminApi("GET", `/admin/trusted-issuers/${name}`)).body.jwks).toEqual(workload.jwks())

    await openProfile(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await addFederated(service, name, { expires: "2031-03-04T05:06" })
    const clientId = await federatedClientId(f)
    await expect.poll(() => credentialRow(service, clientId).textContent()).toContain(`issuer ${name}`)
    const listed = await adminApi("GET", `${servicePathOf(f)}/credentials`)
    expect(listed.body.credentials.find((c: any) => c.client_id === clientId)).toMatchObject({
      expires_at: "2031-03-04T05:06:00.000Z",
      federated: { issuer: name, subject: SUBJECT }
    })
    expect(await noSidewaysScroll(page)).toBe(true)
    await service.getByText("Add a federated credential", { exact: true }).click()
    await service.getByRole("button", { name: "Add claim", exact: true }).click()
    await service.screenshot({ path: join(RESULTS, "federation-service-1280.png") })

    // On a phone the issuers' table stacks, and the form with a claim row still fits.
    await newPage(390, 844)
    await signIn(page, undefined, "#/issuers")
    await issuerRow(page, name).waitFor()
    expect(await noSidewaysScroll(page)).toBe(true)
    await page.screenshot({ path: join(RESULTS, "federation-issuers-390.png"), fullPage: true })
    await openProfile(page, f.profile)
    const narrow = serviceRegion(page, f.serviceName)
    await narrow.getByText("Add a federated credential", { exact: true }).click()
    await narrow.getByRole("button", { name: "Add claim", exact: true }).click()
    expect(await noSidewaysScroll(page)).toBe(true)
    await narrow.screenshot({ path: join(RESULTS, "federation-service-390.png") })
  })

  test("an owner cannot manage issuers, and picks among those that allow its profile", async () => {
    const f = await fixture("fed-owner")
    const name = `owned-${randomBytes(3).toString("hex")}`
    const elsewhere = `elsewhere-${randomBytes(3).toString("hex")}`
    await apiIssuer(name, [f.profile])
    await apiIssuer(elsewhere, [`${f.profile}-other`])
    const owner = await adminApi("POST", "/admin/tokens", { name: `owner-${name}`, role: "owner", profiles: [f.profile] })
    expect(owner.status).toBe(201)

    await signIn(page, owner.body.token)
    await page.getByRole("link", { name: f.profile, exact: true }).waitFor()
    expect(await page.getByRole("link", { name: "Trusted issuers" }).count()).toBe(0)
    await page.goto(`${base}/admin#/issuers`)
    await page.getByText("Only an admin token registers, changes or lists all trusted issuers: your token may not.").waitFor()
    expect(await page.getByRole("button", { name: "Register issuer" }).count()).toBe(0)

    await openProfile(page, f.profile)
    const service = serviceRegion(page, f.serviceName)
    await service.getByText("Add a federated credential", { exact: true }).click()
    const picker = service.getByLabel("Trusted issuer", { exact: true })
    // Only the issuers that allow the profile, with what the workload's tokens must carry.
    expect(await picker.locator("option").allTextContents()).toEqual([`${name} (${workload.url})`])
    await service.getByText(
      `Its tokens must carry aud ${await serverIssuer()}, be signed with RS256, ES256, EdDSA and live at most 3600 s.`
    )
      .waitFor()

    // The issuer stops allowing the profile after the page loaded: the server's refusal, in words.
    expect(
      (await adminApi("PUT", `/admin/trusted-issuers/${name}`, { issuer: workload.url, profiles: [], allow_insecure_loopback: true }))
        .status
    )
      .toBe(200)
    await addFederated(service, name)
    await expect.poll(() => alertText(page)).toContain(`no trusted issuer named ${name} allows profile ${f.profile}`)
    expect(
      (await adminApi("PUT", `/admin/trusted-issuers/${name}`, {
        issuer: workload.url,
        profiles: [f.profile],
        allow_insecure_loopback: true
      }))
        .status
    ).toBe(200)
    await service.getByRole("button", { name: "Add federated credential", exact: true }).click()
    const clientId = await federatedClientId(f)
    await expect.poll(() => credentialRow(service, clientId).textContent()).toContain(`issuer ${name} · subject ${SUBJECT}`)
    expect((await federatedToken(f, clientId, {})).status).toBe(200)
    expect(await noSidewaysScroll(page)).toBe(true)
    await page.screenshot({ path: join(RESULTS, "federation-owner-1280.png"), fullPage: true })
  })
})
