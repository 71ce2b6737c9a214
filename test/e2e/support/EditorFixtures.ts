/**
 * The editor tests' fixtures and page helpers: profiles, services and credentials made through the
 * admin API, token requests and service calls to check what the page did, and the editor's controls
 * found by their labels, roles and names, as a person with a keyboard or a screen reader finds them.
 */
import { randomBytes, randomUUID, type KeyObject } from "node:crypto"
import { SignJWT } from "jose"
import type { Locator, Page } from "playwright-core"
import { expect } from "vitest"
import { ADMIN_TOKEN, adminApi, base, signIn } from "./EditorServer.js"

export interface Fixture {
  readonly profile: string
  readonly env: string
  readonly uuid: string
  readonly serviceName: string
}

let fixtureSeq = 0

/** A fresh profile with one environment and one OAuth service. */
export async function fixture(prefix: string, serviceName = "Billing API", env = "prod"): Promise<Fixture> {
  const profile = `${prefix}-${++fixtureSeq}-${randomBytes(3).toString("hex")}`
  expect((await adminApi("PUT", `/admin/profiles/${profile}`, {})).status).toBe(201)
  expect((await adminApi("PUT", `/admin/profiles/${profile}/environments/${env}`, {})).status).toBe(201)
  return addService({ profile, env, uuid: "", serviceName }, serviceName)
}

export async function addService(f: Fixture, serviceName: string, authType = "oauth"): Promise<Fixture> {
  const created = await adminApi("POST", `/admin/profiles/${f.profile}/environments/${f.env}/services`, {
    name: serviceName,
    auth_type: authType
  })
  expect(created.status).toBe(201)
  return { profile: f.profile, env: f.env, uuid: created.body.uuid as string, serviceName }
}

/** Creates a credential directly through the API (not through the page). */
export async function apiCredential(f: Fixture): Promise<{ client_id: string; client_secret: string }> {
  const created = await adminApi("POST", `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}/credentials`, {})
  expect(created.status).toBe(201)
  return created.body
}

/** A token request for the fixture's service, authenticated by `client` (a secret or an assertion). */
export async function tokenFor(f: Fixture, client: Record<string, string>) {
  const response = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...client, profile: f.profile, environment: f.env, service_uuid: f.uuid })
  })
  return { status: response.status, body: (await response.json()) as any }
}

export const requestToken = (f: Fixture, clientId: string, clientSecret: string) =>
  tokenFor(f, { client_id: clientId, client_secret: clientSecret })

export async function callService(f: Fixture, accessToken: string) {
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

export async function openEditor(p: Page, profile: string) {
  await signIn(p, ADMIN_TOKEN, `#/profiles/${profile}`)
  await p.getByRole("heading", { level: 1, name: profile, exact: true }).waitFor()
  await p.getByRole("button", { name: "Save profile", exact: true }).waitFor()
}

export const serviceRegion = (p: Page, name: string) => p.getByRole("region", { name, exact: true })
export const addButton = (region: Locator) => region.getByRole("button", { name: "Add credential", exact: true })
export const saveButton = (p: Page) => p.getByRole("button", { name: "Save profile", exact: true })
export const credentialRow = (region: Locator, clientId: string) => region.getByRole("row").filter({ hasText: clientId })
export const alertText = async (p: Page) => (await p.getByRole("alert").textContent()) ?? ""

/** Records the body of every save request the page sends. */
export function recordSaves(p: Page) {
  const saves: Array<unknown> = []
  p.on("request", (request) => {
    if (request.method() === "POST" && /\/admin\/profiles\/[^/]+\/save$/.test(new URL(request.url()).pathname)) {
      saves.push(request.postDataJSON())
    }
  })
  return saves
}

/** Saves and reads the one new secret from the panel (Client ID / Client secret fields). */
export async function saveAndReadSecret(p: Page) {
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
export async function keyToken(f: Fixture, clientId: string, privateKey: KeyObject, alg: "ES256" | "RS256") {
  const now = Math.floor(Date.now() / 1000)
  // The assertion's audience is the issuer identifier, as discovery says it (ISSUER, or localhost by default).
  const { issuer } = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as { issuer: string }
  const assertion = await new SignJWT({ iss: clientId, sub: clientId, aud: issuer, jti: randomUUID(), iat: now, exp: now + 60 })
    .setProtectedHeader({ alg })
    .sign(privateKey)
  return tokenFor(f, { client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: assertion })
}

/** Pastes `text` into a service's "Add a public key" form and stages it. */
export async function stageKey(service: Locator, text: string) {
  const field = service.getByLabel("Public key (JWK or PEM)", { exact: true })
  // The form stays open after a refusal, and closes once a key is staged.
  if (!(await field.isVisible())) await service.getByText("Add a public key", { exact: true }).click()
  await field.fill(text)
  await service.getByRole("button", { name: "Stage key credential", exact: true }).click()
}

/** Saves a profile whose staged additions are key credentials: no secret is shown. */
export async function saveKeys(p: Page, saves: Array<unknown>) {
  const before = saves.length
  await saveButton(p).click()
  await expect.poll(() => saves.length).toBe(before + 1)
  await expect.poll(() => p.getByText("No unsaved changes.").count()).toBe(1)
  expect(await p.getByLabel("Client secret", { exact: true }).count()).toBe(0)
}

export const activeElementLabel = (p: Page) =>
  p.evaluate(() => {
    const el = document.activeElement
    return el ? el.getAttribute("aria-label") ?? el.textContent ?? "" : ""
  })

/** The admin API's path of the fixture's service. */
export const servicePathOf = (f: Fixture) => `/admin/profiles/${f.profile}/environments/${f.env}/services/${f.uuid}`

/** A fresh profile with one OAuth service ("Billing API") holding one secret credential. */
export async function givenCredential(prefix: string) {
  const f = await fixture(prefix)
  const credential = await apiCredential(f)
  return { ...f, servicePath: servicePathOf(f), clientId: credential.client_id }
}
