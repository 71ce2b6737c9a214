/**
 * Every snippet of docs/integrators.md runs as written against a real server (`npm start`): the
 * blocks marked `file=NAME` are extracted to files and run, JavaScript with node, Python in a
 * virtual environment with requests-oauthlib and PyJWT (created once, under node_modules/.cache).
 * The clients get a token and call the service; the resource servers verify a token with issuer
 * and audience, and refuse one issued for another service; the upstreams verify the gateway's
 * assertion for the service they serve, and refuse one from a call through another profile's
 * service pointed at the same URL, or from a call no verified client made.
 */
import { execFile } from "node:child_process"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./support/ServerProcess.js"
import { adminJson } from "./support/AdminFetch.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const run = promisify(execFile)
const ADMIN_TOKEN = randomBytes(24).toString("base64url")

/** The Python packages the snippets use, pinned. */
const PYTHON_PACKAGES = ["requests-oauthlib==2.0.0", "PyJWT[crypto]==2.15.1"]
const VENV = join(ROOT, "node_modules/.cache/service-auth-integrators-venv")

const snippets = (): Map<string, string> => {
  const page = readFileSync(join(ROOT, "docs/integrators.md"), "utf8")
  const found = new Map<string, string>()
  for (const match of page.matchAll(/```\w+ file=(\S+)\n([\s\S]*?)```/g)) found.set(match[1]!, match[2]!)
  return found
}

/** A virtual environment with the snippets' packages; made once, reused after. */
const python = async (): Promise<string> => {
  const interpreter = join(VENV, "bin/python")
  const marker = join(VENV, "installed.txt")
  if (existsSync(marker) && readFileSync(marker, "utf8") === PYTHON_PACKAGES.join("\n")) return interpreter
  rmSync(VENV, { recursive: true, force: true })
  mkdirSync(join(VENV, ".."), { recursive: true })
  await run("python3", ["-m", "venv", VENV])
  await run(join(VENV, "bin/pip"), ["install", "--quiet", "--retries", "0", "--timeout", "10", ...PYTHON_PACKAGES], {
    timeout: 240_000
  }).catch((error: { stderr?: string }) => {
    throw new Error(`pip could not install ${PYTHON_PACKAGES.join(", ")} (a package index is needed): ${error.stderr}`)
  })
  writeFileSync(marker, PYTHON_PACKAGES.join("\n"))
  return interpreter
}

describe("docs/integrators.md snippets, run as written", () => {
  let server: ServerProcess
  const workDir = mkdtempSync(join(ROOT, "node_modules", ".integrator-snippets-"))
  const env: Record<string, string> = {}
  let otherService = ""

  const admin = (method: string, path: string, body?: unknown) => adminJson(server.base, ADMIN_TOKEN, method, path, body)

  const runSnippet = async (file: string, extra: Record<string, string> = {}) => {
    const code = snippets().get(file)
    expect(code, `docs/integrators.md has no block file=${file}`).toBeDefined()
    writeFileSync(join(workDir, file), code!)
    const command = file.endsWith(".py") ? await python() : process.execPath
    const { stdout } = await run(command, [join(workDir, file)], {
      cwd: workDir,
      env: { ...process.env, ...env, ...extra },
      timeout: 30_000
    })
    return stdout.trim()
  }

  const token = async () => {
    const response = await fetch(`${server.base}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: env.CLIENT_ID!,
        client_secret: env.CLIENT_SECRET!,
        profile: env.PROFILE!,
        environment: env.ENVIRONMENT!,
        service_uuid: env.SERVICE_UUID!
      })
    })
    return String(((await response.json()) as { access_token: string }).access_token)
  }

  /** A proxy service's upstream: it keeps the headers of the last call it received. */
  let upstream: Server | undefined
  let upstreamReceived: IncomingHttpHeaders | undefined
  let upstreamUrl = ""

  /** A proxy service to the upstream, and a credential of it when it is an oauth service. */
  interface Proxied {
    readonly profile: string
    readonly environment: string
    readonly uuid: string
    readonly credential?: { readonly client_id: string; readonly client_secret: string }
  }
  /** The upstream's own service; another profile's oauth service and an open one, set up by an admin with its URL. */
  let proxied: Proxied | undefined
  let elsewhere: Proxied | undefined
  let open: Proxied | undefined

  const proxyService = async (profile: string, authType: "oauth" | "none"): Promise<Proxied> => {
    const service = await admin("POST", `/admin/profiles/${profile}/environments/production/services`, {
      name: "orders",
      auth_type: authType,
      handler: { type: "proxy", url: upstreamUrl }
    })
    const address = { profile, environment: "production", uuid: String(service.uuid) }
    if (authType === "none") return address
    const credential = await admin("POST", `/admin/profiles/${profile}/environments/production/services/${service.uuid}/credentials`)
    return { ...address, credential }
  }

  /** A call through the service (with a token of its own when it is an oauth service), answered 200. */
  const callThrough = async (service: Proxied) => {
    const headers: Record<string, string> = { "content-type": "application/json" }
    if (service.credential !== undefined) {
      const issued = await fetch(`${server.base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: service.credential.client_id,
          client_secret: service.credential.client_secret,
          profile: service.profile,
          environment: service.environment,
          service_uuid: service.uuid
        })
      })
      headers["authorization"] = `Bearer ${((await issued.json()) as { access_token: string }).access_token}`
    }
    upstreamReceived = undefined
    const called = await fetch(`${server.base}/service/${service.profile}/${service.environment}/json/${service.uuid}`, {
      method: "POST",
      headers,
      body: "{}"
    })
    expect(called.status).toBe(200)
    expect(upstreamReceived).toBeDefined()
  }

  beforeAll(async () => {
    upstream = createServer((request, response) => {
      upstreamReceived = request.headers
      request.resume()
      request.on("end", () => response.writeHead(200, { "content-type": "application/json" }).end("{}"))
    })
    await new Promise<void>((resolve) => upstream!.listen(0, "127.0.0.1", resolve))
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/orders`
    // The snippets run from a directory inside the package, so that they resolve its node_modules.
    writeFileSync(join(workDir, "package.json"), JSON.stringify({ type: "module" }))
    server = await startServer({ ADMIN_TOKEN, DATA_DIR: join(workDir, "data") })
    const profile = `integrators-${randomBytes(4).toString("hex")}`
    await admin("PUT", `/admin/profiles/${profile}`)
    await admin("PUT", `/admin/profiles/${profile}/environments/production`)
    const service = await admin("POST", `/admin/profiles/${profile}/environments/production/services`, {
      name: "billing",
      auth_type: "oauth"
    })
    otherService = (await admin("POST", `/admin/profiles/${profile}/environments/production/services`, {
      name: "other",
      auth_type: "oauth"
    })).uuid
    const credential = await admin("POST", `/admin/profiles/${profile}/environments/production/services/${service.uuid}/credentials`)
    proxied = await proxyService(profile, "oauth")
    // Another profile whose services point at the same upstream URL (an admin wrote them; an owner
    // of that profile could have): one with clients of its own, and one without OAuth.
    const otherProfile = `integrators-${randomBytes(4).toString("hex")}`
    await admin("PUT", `/admin/profiles/${otherProfile}`)
    await admin("PUT", `/admin/profiles/${otherProfile}/environments/production`)
    elsewhere = await proxyService(otherProfile, "oauth")
    open = await proxyService(otherProfile, "none")
    Object.assign(env, {
      // The default issuer (ISSUER unset) is http://localhost:PORT.
      SERVICE_AUTH_URL: `http://localhost:${server.port}`,
      CLIENT_ID: credential.client_id,
      CLIENT_SECRET: credential.client_secret,
      PROFILE: profile,
      ENVIRONMENT: "production",
      SERVICE_UUID: service.uuid
    })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    upstream?.closeAllConnections()
    upstream?.close()
    rmSync(workDir, { recursive: true, force: true })
  })

  it("has the ten snippets the page promises", () => {
    expect([...snippets().keys()].sort()).toEqual([
      "client-oauth4webapi.mjs",
      "client-openid-client.mjs",
      "client_requests_oauthlib.py",
      "introspect-fetch.mjs",
      "introspect-openid-client.mjs",
      "revoke-fetch.mjs",
      "upstream-jose.mjs",
      "upstream_pyjwt.py",
      "verify-jose.mjs",
      "verify_pyjwt.py"
    ].sort())
  })

  const echoOf = () => JSON.stringify({ hello: "world" })

  it("oauth4webapi: RFC 8414 discovery, client_secret_basic with the service parameters, then the call", async () => {
    const [expiresIn, status, body] = (await runSnippet("client-oauth4webapi.mjs")).split(" ")
    expect([expiresIn, status]).toEqual(["3600", "200"])
    expect(JSON.parse(body!)).toMatchObject({ body: JSON.parse(echoOf()), client_id: env.CLIENT_ID })
  })

  it("openid-client: RFC 8414 discovery, client_secret_post with the service parameters, then the call", async () => {
    const [expiresIn, status, body] = (await runSnippet("client-openid-client.mjs")).split(" ")
    expect([expiresIn, status]).toEqual(["3600", "200"])
    expect(JSON.parse(body!)).toMatchObject({ body: JSON.parse(echoOf()), client_id: env.CLIENT_ID })
  })

  it("Python requests-oauthlib: a token with HTTP Basic and the service parameters, then the call", async () => {
    const [expiresIn, status, ...body] = (await runSnippet("client_requests_oauthlib.py")).split(" ")
    expect([expiresIn, status]).toEqual(["3600", "200"])
    expect(JSON.parse(body.join(" "))).toMatchObject({ body: JSON.parse(echoOf()), client_id: env.CLIENT_ID })
  }, 300_000)

  it("jose: verifies issuer, audience and signature; refuses a token for another service", async () => {
    const accessToken = await token()
    expect(await runSnippet("verify-jose.mjs", { ACCESS_TOKEN: accessToken })).toBe(
      `${env.CLIENT_ID} service:call ${
        JSON.stringify({ service_uuid: env.SERVICE_UUID, profile: env.PROFILE, environment: env.ENVIRONMENT })
      }`
    )
    await expect(runSnippet("verify-jose.mjs", { ACCESS_TOKEN: accessToken, SERVICE_UUID: otherService })).rejects
      .toThrow(/aud/)
  })

  it("PyJWT: verifies issuer, audience and signature; refuses a token for another service", async () => {
    const accessToken = await token()
    expect(await runSnippet("verify_pyjwt.py", { ACCESS_TOKEN: accessToken })).toBe(
      `${env.CLIENT_ID} service:call ${env.SERVICE_UUID}`
    )
    await expect(runSnippet("verify_pyjwt.py", { ACCESS_TOKEN: accessToken, SERVICE_UUID: otherService })).rejects
      .toThrow(/InvalidAudienceError|audience/i)
  }, 300_000)

  it("openid-client: a resource server's own credential, allowed by an admin, introspects with tokenIntrospection", async () => {
    const accessToken = await token()
    // The resource server's credential, on a service of a profile of its own.
    const profile = `rs-${randomBytes(4).toString("hex")}`
    await admin("PUT", `/admin/profiles/${profile}`)
    await admin("PUT", `/admin/profiles/${profile}/environments/production`)
    const service = await admin("POST", `/admin/profiles/${profile}/environments/production/services`, { name: "rs", auth_type: "oauth" })
    const servicePath = `/admin/profiles/${profile}/environments/production/services/${service.uuid}`
    const rs = await admin("POST", `${servicePath}/credentials`)
    const extra = { ACCESS_TOKEN: accessToken, RS_CLIENT_ID: rs.client_id, RS_CLIENT_SECRET: rs.client_secret }
    await expect(runSnippet("introspect-openid-client.mjs", extra)).rejects.toThrow(/unauthorized_client|403/)
    await admin("PUT", `${servicePath}/credentials/${rs.client_id}/introspect_profiles`, { introspect_profiles: [env.PROFILE] })
    expect(await runSnippet("introspect-openid-client.mjs", extra)).toBe(`true ${env.CLIENT_ID} Bearer`)
    await admin("DELETE", `/admin/profiles/${profile}`)
  })

  it("fetch: a resource server introspects (cached briefly); the client revokes; introspection says inactive", async () => {
    const accessToken = await token()
    const introspector = await admin("POST", "/admin/tokens", {
      name: `rs-${randomBytes(4).toString("hex")}`,
      role: "introspector",
      profiles: [env.PROFILE]
    })
    const extra = { ACCESS_TOKEN: accessToken, INTROSPECTION_TOKEN: introspector.token }
    expect(await runSnippet("introspect-fetch.mjs", extra)).toBe(`true ${env.CLIENT_ID} true`)
    expect(await runSnippet("revoke-fetch.mjs", { ACCESS_TOKEN: accessToken })).toBe(`200 ""`)
    expect(await runSnippet("introspect-fetch.mjs", extra)).toBe("false - true")
    const refused = await fetch(`${server.base}/service/${env.PROFILE}/${env.ENVIRONMENT}/json/${env.SERVICE_UUID}`, {
      method: "POST",
      headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
      body: "{}"
    })
    expect(refused.status).toBe(401)
  })

  /**
   * What the upstream received from a call through `service` made now (the assertion and the client
   * id), and what it was configured with: its URL and the service it serves, `proxied` unless said.
   */
  const received = async (service: Proxied = proxied!, configuredFor: Proxied = proxied!) => {
    await callThrough(service)
    const clientId = upstreamReceived!["x-client-id"]
    return {
      ASSERTION: String(upstreamReceived!["x-service-auth-assertion"]),
      ...(clientId === undefined ? {} : { CLIENT_ID_HEADER: String(clientId) }),
      UPSTREAM_URL: upstreamUrl,
      PROFILE: configuredFor.profile,
      ENVIRONMENT: configuredFor.environment,
      SERVICE_UUID: configuredFor.uuid
    }
  }

  it("jose (an upstream): verifies the gateway's assertion for its service; refuses another upstream URL or client id", async () => {
    const headers = await received()
    const [sub, uuid] = (await runSnippet("upstream-jose.mjs", headers)).split(" ")
    expect(sub).toBe(headers.CLIENT_ID_HEADER)
    expect(sub).toBe(proxied!.credential!.client_id)
    expect(uuid).toBe(proxied!.uuid)
    await expect(runSnippet("upstream-jose.mjs", { ...headers, UPSTREAM_URL: `${upstreamUrl}/other` })).rejects.toThrow(/aud/)
    await expect(runSnippet("upstream-jose.mjs", { ...headers, CLIENT_ID_HEADER: "svc_forged" })).rejects.toThrow(/subject/)
  })

  it("jose (an upstream): a call through another profile's service at the same URL verifies, but is for another service", async () => {
    const through = await received(elsewhere, proxied)
    await expect(runSnippet("upstream-jose.mjs", through)).rejects.toThrow(/the assertion is for another service/)
    // The same assertion passes the recipe of an upstream that serves that other service: it is sound, just not ours.
    const theirs = await received(elsewhere, elsewhere)
    expect((await runSnippet("upstream-jose.mjs", theirs)).split(" ")).toEqual([elsewhere!.credential!.client_id, elsewhere!.uuid])
  })

  it("jose (an upstream): a call through a service without OAuth is seen as made by no verified client", async () => {
    const anonymous = await received(open, open)
    expect(anonymous.CLIENT_ID_HEADER).toBeUndefined()
    await expect(runSnippet("upstream-jose.mjs", anonymous)).rejects.toThrow(/no verified client made this call/)
    await expect(runSnippet("upstream-jose.mjs", await received(open, proxied))).rejects.toThrow(/the assertion is for another service/)
  })

  it("PyJWT (an upstream): verifies the gateway's assertion for its service; refuses another URL, service or an open call", async () => {
    const headers = await received()
    expect((await runSnippet("upstream_pyjwt.py", headers)).split(" ")).toEqual([proxied!.credential!.client_id, proxied!.uuid])
    await expect(runSnippet("upstream_pyjwt.py", { ...headers, UPSTREAM_URL: `${upstreamUrl}/other` })).rejects
      .toThrow(/InvalidAudienceError|audience/i)
    await expect(runSnippet("upstream_pyjwt.py", { ...headers, CLIENT_ID_HEADER: "svc_forged" })).rejects.toThrow(/subject/)
    await expect(runSnippet("upstream_pyjwt.py", await received(elsewhere, proxied))).rejects
      .toThrow(/the assertion is for another service/)
    await expect(runSnippet("upstream_pyjwt.py", await received(open, open))).rejects.toThrow(/no verified client made this call/)
  }, 300_000)
})
