/**
 * Secret hygiene: the real server (`npm start`) runs the whole flow with
 * LOG_LEVEL=debug; every line it prints is captured, and none may contain a client secret, an
 * access token (or its signature), the admin token or the private signing key. Error bodies never
 * echo a secret the client submitted: wrong client secrets (form and Basic), wrong admin tokens,
 * bogus bearer tokens, a secret pasted where a client id belongs.
 *
 * The server runs on the embedded database in a fresh temporary directory, with a signing key
 * generated here (PKCS#8 PEM), so the test knows every secret it must look for.
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { basic, expectError, form, formHeaders, hygieneRun, secretLooking } from "./support/SecretHygieneRun.js"

const run = hygieneRun()
const { ADMIN_TOKEN, admin, call, remember, secrets } = run

describe("secret hygiene: the real server at LOG_LEVEL=debug", () => {
  beforeAll(run.start, 60_000)
  afterAll(run.stop, 30_000)

  it("runs the whole flow; no answer echoes a submitted secret", async () => {
    const profile = `hygiene-${randomBytes(4).toString("hex")}`
    const environment = "production"
    const profilePath = `/admin/profiles/${profile}`

    // Catalogue: profile, environment, an oauth service.
    expect((await admin("PUT", profilePath, {})).status).toBe(201)
    expect((await admin("PUT", `${profilePath}/environments/${environment}`, {})).status).toBe(201)
    const service = await admin("POST", `${profilePath}/environments/${environment}/services`, { name: "billing", auth_type: "oauth" })
    expect(service.status, service.text).toBe(201)
    const uuid: string = service.body.uuid
    const servicePath = `${profilePath}/environments/${environment}/services/${uuid}`
    const callPath = `/service/${profile}/${environment}/json/${uuid}`

    // Credential 1 by POST; credential 2 by a profile save.
    const created = await call("POST", `${servicePath}/credentials`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: "{}",
      mayReveal: "credential"
    })
    expect(created.status, created.text).toBe(201)
    const first = { id: created.body.client_id as string, secret: created.body.client_secret as string }
    remember("client secret (POST credentials)", first.secret)

    const saved = await call("POST", `${profilePath}/save`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ changes: [{ op: "add_credential", environment, service_uuid: uuid }] }),
      mayReveal: "credential"
    })
    expect(saved.status, saved.text).toBe(200)
    const second = { id: saved.body.created[0].client_id as string, secret: saved.body.created[0].client_secret as string }
    remember("client secret (save)", second.secret)

    // The credentials listing and the profile document never carry a secret.
    expect((await admin("GET", `${servicePath}/credentials`)).status).toBe(200)
    expect((await admin("GET", profilePath)).status).toBe(200)
    expect((await admin("GET", "/admin/profiles")).status).toBe(200)

    // Tokens: client_secret_post with the first, client_secret_basic with the second.
    const fields = { grant_type: "client_credentials", profile, environment, service_uuid: uuid }
    const postToken = await call("POST", "/oauth/token", {
      headers: formHeaders,
      body: form({ ...fields, client_id: first.id, client_secret: first.secret }),
      mayReveal: "token"
    })
    expect(postToken.status, postToken.text).toBe(200)
    const basicToken = await call("POST", "/oauth/token", {
      headers: { ...formHeaders, authorization: basic(second.id, second.secret) },
      body: form(fields),
      mayReveal: "token"
    })
    expect(basicToken.status, basicToken.text).toBe(200)
    const tokens = [postToken.body.access_token as string, basicToken.body.access_token as string]
    for (const [i, token] of tokens.entries()) {
      remember(`access token ${i + 1}`, token)
      remember(`access token ${i + 1} signature`, token.split(".")[2]!)
    }
    // The token answers carry their own token only: never a client secret or the admin token.
    for (const answer of [postToken, basicToken]) {
      for (const value of [first.secret, second.secret, ADMIN_TOKEN]) expect(answer.text).not.toContain(value)
    }

    // Wrong secrets, by form and by Basic, for a real and an unknown client id.
    for (const [label, clientId] of [["real", first.id], ["unknown", `svc_${randomBytes(16).toString("hex")}`]] as const) {
      const wrong = secretLooking(`wrong-post-${label}`)
      remember(`wrong client secret (post, ${label} id)`, wrong)
      expectError(
        await call("POST", "/oauth/token", { headers: formHeaders, body: form({ ...fields, client_id: clientId, client_secret: wrong }) }),
        401,
        "invalid_client",
        [wrong]
      )
      const wrongBasic = secretLooking(`wrong-basic-${label}`)
      remember(`wrong client secret (basic, ${label} id)`, wrongBasic)
      const answer = await call("POST", "/oauth/token", {
        headers: { ...formHeaders, authorization: basic(clientId, wrongBasic) },
        body: form(fields)
      })
      expectError(answer, 401, "invalid_client", [wrongBasic])
      expect(answer.headers.get("www-authenticate")).toBe(`Basic realm="oauth"`)
    }
    // A secret sent in the client_id slot, and both methods at once.
    const inIdSlot = secretLooking("in-client-id")
    remember("secret in the client_id field", inIdSlot)
    expectError(
      await call("POST", "/oauth/token", {
        headers: formHeaders,
        body: form({ ...fields, client_id: inIdSlot, client_secret: first.secret })
      }),
      401,
      "invalid_client",
      [inIdSlot, first.secret]
    )
    expectError(
      await call("POST", "/oauth/token", {
        headers: { ...formHeaders, authorization: basic(first.id, first.secret) },
        body: form({ ...fields, client_id: first.id, client_secret: first.secret })
      }),
      400,
      "invalid_request",
      [first.secret]
    )
    // Other 4xx at the token endpoint: a missing field, an unsupported grant, an unknown profile.
    expectError(
      await call("POST", "/oauth/token", {
        headers: formHeaders,
        body: form({ grant_type: "client_credentials", client_secret: first.secret })
      }),
      400,
      "invalid_request",
      [first.secret]
    )
    expectError(
      await call("POST", "/oauth/token", {
        headers: formHeaders,
        body: form({ ...fields, grant_type: "password", client_id: first.id, client_secret: first.secret })
      }),
      400,
      "unsupported_grant_type",
      [first.secret]
    )
    expectError(
      await call("POST", "/oauth/token", {
        headers: formHeaders,
        body: form({ ...fields, profile: "nope", client_id: first.id, client_secret: first.secret })
      }),
      400,
      "invalid_request",
      [first.secret]
    )

    // Service calls: both tokens work; bogus tokens are refused without being echoed.
    for (const token of tokens) {
      const answer = await call("POST", callPath, {
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: "{\"n\":1}"
      })
      expect(answer.status, answer.text).toBe(200)
    }
    const bogus = secretLooking("bogus-token")
    remember("bogus bearer token", bogus)
    const forged = `${tokens[0]!.split(".").slice(0, 2).join(".")}.${Buffer.from(secretLooking("forged-signature")).toString("base64url")}`
    remember("forged token", forged)
    for (const token of [bogus, forged, `${tokens[0]}x`]) {
      const answer = await call("POST", callPath, {
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: "{}"
      })
      expectError(answer, 401, "invalid_token", [token])
      expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer realm="service", error="invalid_token"/)
    }
    expectError(
      await call("POST", callPath, { headers: { authorization: `Basic ${bogus}`, "content-type": "application/json" }, body: "{}" }),
      400,
      "invalid_request",
      [bogus]
    )
    expectError(await call("POST", callPath, { headers: { "content-type": "application/json" }, body: "{}" }), 401, "invalid_token")
    expectError(
      await call("POST", `/service/${profile}/${environment}/json/${"0".repeat(8)}-0000-0000-0000-${"0".repeat(12)}`, {
        headers: { authorization: `Bearer ${tokens[0]}` },
        body: "{}"
      }),
      404,
      "not_found",
      [tokens[0]!]
    )
    // A token for this service, at another service path, is refused and not echoed.
    expectError(
      await call("POST", `/service/${profile}/staging/json/${uuid}`, { headers: { authorization: `Bearer ${tokens[0]}` }, body: "{}" }),
      404,
      "not_found",
      [tokens[0]!]
    )

    // The admin API: wrong admin tokens, in both schemes; a secret where a client id belongs.
    const wrongAdmin = secretLooking("wrong-admin-token")
    remember("wrong admin token", wrongAdmin)
    expectError(await admin("GET", "/admin/profiles", undefined, wrongAdmin), 401, "unauthorized", [wrongAdmin, ADMIN_TOKEN])
    expectError(await call("GET", "/admin/profiles", { headers: { authorization: `Basic ${ADMIN_TOKEN}` } }), 401, "unauthorized", [
      ADMIN_TOKEN
    ])
    expectError(await call("GET", "/admin/profiles", { headers: { authorization: basic("admin", wrongAdmin) } }), 401, "unauthorized", [
      wrongAdmin
    ])
    expectError(await admin("PUT", `/admin/profiles/${profile}x`, {}, `${ADMIN_TOKEN}x`), 401, "unauthorized", [ADMIN_TOKEN])

    const pasted = secretLooking("pasted-as-client-id")
    remember("secret pasted as a client id", pasted)
    expectError(
      await admin("POST", `${profilePath}/save`, {
        changes: [{ op: "remove_credential", environment, service_uuid: uuid, client_id: pasted }]
      }),
      400,
      "invalid_request",
      [pasted]
    )
    expectError(
      await admin("POST", `${profilePath}/save`, {
        changes: [{ op: "remove_credential", environment, service_uuid: uuid, client_id: first.secret }]
      }),
      400,
      "invalid_request",
      [first.secret]
    )
    const inBody = secretLooking("in-admin-body")
    remember("secret inside an admin body", inBody)
    expectError(await admin("PUT", profilePath, { client_secret: inBody }), 400, "invalid_request", [inBody])
    expectError(await admin("POST", `${servicePath}/credentials`, { client_secret: inBody }), 400, "invalid_request", [inBody])

    // Rotation: remove the first credential by a save, delete the second one directly.
    const removed = await admin("POST", `${profilePath}/save`, {
      changes: [{ op: "remove_credential", environment, service_uuid: uuid, client_id: first.id }]
    })
    expect(removed.status, removed.text).toBe(200)
    expect(removed.body.removed).toEqual([{ environment, service_uuid: uuid, client_id: first.id }])
    expect((await admin("DELETE", `${servicePath}/credentials/${second.id}`)).status).toBe(204)
    expectError(await admin("DELETE", `${servicePath}/credentials/${second.id}`), 404, "not_found")

    // The deleted credentials: their tokens and secrets are refused, and not echoed.
    for (const token of tokens) {
      expectError(await call("POST", callPath, { headers: { authorization: `Bearer ${token}` }, body: "{}" }), 401, "invalid_token", [
        token
      ])
    }
    expectError(
      await call("POST", "/oauth/token", {
        headers: formHeaders,
        body: form({ ...fields, client_id: first.id, client_secret: first.secret })
      }),
      401,
      "invalid_client",
      [first.secret]
    )
    expectError(
      await call("POST", "/oauth/token", {
        headers: { ...formHeaders, authorization: basic(second.id, second.secret) },
        body: form(fields)
      }),
      401,
      "invalid_client",
      [second.secret]
    )

    // Query strings are never logged (a client may wrongly put a secret or token there).
    const inQuery = secretLooking("in-query")
    remember("secret in a query string", inQuery)
    expect((await call("GET", `/healthz?client_secret=${inQuery}`)).status).toBe(200)
    expectError(
      await call("POST", `/oauth/token?client_secret=${inQuery}&access_token=${inQuery}`, { headers: formHeaders, body: form(fields) }),
      400,
      "invalid_request",
      [inQuery]
    )
    expectError(
      await call("POST", `${callPath}?access_token=${inQuery}`, { headers: { "content-type": "application/json" }, body: "{}" }),
      401,
      "invalid_token",
      [inQuery]
    )

    // Discovery publishes the public key only.
    const jwks = await call("GET", "/.well-known/jwks.json")
    expect(jwks.status).toBe(200)
    expect(Object.keys(jwks.body.keys[0]).sort()).toEqual(["alg", "e", "kid", "kty", "n", "use"])
  }, 30_000)

  it("the log (debug) contains none of the secrets", async () => {
    const server = run.server()
    expect(server).toBeDefined()
    // Stopped first, so that everything it printed, shutdown included, is in the log.
    await server!.stop()
    const log = server!.log()
    // Debug logging was on: one line per request at least.
    expect(log).toMatch(/level=DEBUG/)
    expect(log).toMatch(/POST \/oauth\/token 200/)
    expect(log.split("\n").length).toBeGreaterThan(40)
    // Every secret the flow used or submitted is known here (client secrets, tokens, wrong ones).
    expect(secrets.size).toBeGreaterThan(25)
    const leaked = [...secrets].filter(([value]) => log.includes(value)).map(([, label]) => label)
    expect(leaked, `secrets in the log:\n${leaked.join("\n")}`).toEqual([])
    // Nor the PEM armour, nor anything that looks like a header carrying credentials.
    expect(log).not.toMatch(/PRIVATE KEY|authorization:|client_secret=|"client_secret"/i)
  }, 30_000)
})
