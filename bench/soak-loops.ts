/**
 * The soak's load: token loops over many credentials, call loops with cached tokens, a loop that
 * creates, calls and deletes services across the instances (a deleted service that still answers is
 * a violation), and a noise loop of what a caller chooses freely (unknown paths, request ids,
 * forged tokens, source addresses across 127.0.0.0/8), so a map keyed by any of them would show in
 * the RSS. Every request goes to 127.0.0.1 (or another loopback address) only, and each loop ends
 * when the soak's deadline passes.
 */
import { request as httpRequest } from "node:http"
import { randomBytes, randomUUID } from "node:crypto"
import { type Server, snapshotting } from "./soak-servers.js"

export interface Counts {
  tokens: number
  calls: number
  lifecycles: number
  noise: number
  /** Answers that were not the expected one, by what was asked and what came back. */
  readonly errors: Map<string, number>
  /** Requests cut by the instance killed on purpose (connection reset or refused), or by a heap snapshot. */
  interrupted: number
  /** A deleted service or credential that still answered 200. */
  violations: number
  deletedChecked: number
}

export const newCounts = (): Counts => ({
  tokens: 0,
  calls: 0,
  lifecycles: 0,
  noise: 0,
  errors: new Map(),
  interrupted: 0,
  violations: 0,
  deletedChecked: 0
})

export interface Credential {
  readonly clientId: string
  readonly secret: string
  readonly serviceUuid: string
  token?: string | undefined
}

export interface Topology {
  readonly servers: ReadonlyArray<Server>
  readonly adminToken: string
  readonly profile: string
  readonly environment: string
  readonly credentials: ReadonlyArray<Credential>
  readonly counts: Counts
  readonly until: () => boolean
  readonly pauseMs: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(Math.random() * items.length)]!

const liveServer = async (topology: Topology): Promise<Server | undefined> => {
  while (!topology.until()) {
    const up = topology.servers.filter((s) => s.up)
    if (up.length > 0) return pick(up)
    await sleep(100)
  }
  return undefined
}

const noteError = (counts: Counts, what: string) => counts.errors.set(what, (counts.errors.get(what) ?? 0) + 1)

/**
 * A request to `server`; undefined when the server was killed under it, or stopped by writing a heap
 * snapshot (counted as interrupted).
 */
const send = async (
  topology: Topology,
  server: Server,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string
): Promise<{ status: number; json: Record<string, unknown> } | undefined> => {
  try {
    const response = await fetch(`${server.base}${path}`, { method, headers, body: body ?? null, signal: AbortSignal.timeout(15_000) })
    const text = await response.text()
    let json: Record<string, unknown> = {}
    try {
      json = text === "" ? {} : JSON.parse(text)
    } catch {
      json = { raw: text.slice(0, 200) }
    }
    return { status: response.status, json }
  } catch (error) {
    if (!server.up || snapshotting(server)) {
      topology.counts.interrupted += 1
      return undefined
    }
    noteError(topology.counts, `${method} ${path.split("/")[1]}: ${(error as Error).cause ?? (error as Error).message}`)
    return undefined
  }
}

const admin = (topology: Topology, server: Server, method: string, path: string, body: unknown = {}) =>
  send(topology, server, method, path, {
    authorization: `Bearer ${topology.adminToken}`,
    "content-type": "application/json"
  }, JSON.stringify(body))

const tokenBody = (topology: Topology, credential: Credential) =>
  new URLSearchParams({
    grant_type: "client_credentials",
    client_id: credential.clientId,
    client_secret: credential.secret,
    profile: topology.profile,
    environment: topology.environment,
    service_uuid: credential.serviceUuid
  }).toString()

const requestToken = async (topology: Topology, server: Server, credential: Credential) => {
  const answer = await send(topology, server, "POST", "/oauth/token", {
    "content-type": "application/x-www-form-urlencoded"
  }, tokenBody(topology, credential))
  return answer
}

const callService = (topology: Topology, server: Server, serviceUuid: string, token: string) =>
  send(topology, server, "POST", `/service/${topology.profile}/${topology.environment}/json/${serviceUuid}`, {
    authorization: `Bearer ${token}`,
    "content-type": "application/json"
  }, `{"amount":42}`)

export const tokenLoop = async (topology: Topology) => {
  for (;;) {
    const server = await liveServer(topology)
    if (server === undefined) return
    const credential = pick(topology.credentials)
    const answer = await requestToken(topology, server, credential)
    if (answer?.status === 200) {
      topology.counts.tokens += 1
      credential.token = String(answer.json.access_token)
    } else if (answer !== undefined) noteError(topology.counts, `token: ${answer.status} ${String(answer.json.error)}`)
    if (topology.pauseMs > 0) await sleep(topology.pauseMs)
  }
}

export const callLoop = async (topology: Topology) => {
  for (;;) {
    const server = await liveServer(topology)
    if (server === undefined) return
    const credential = pick(topology.credentials)
    if (credential.token === undefined) {
      const answer = await requestToken(topology, server, credential)
      if (answer?.status === 200) credential.token = String(answer.json.access_token)
      continue
    }
    const answer = await callService(topology, server, credential.serviceUuid, credential.token)
    if (answer?.status === 200) topology.counts.calls += 1
    else if (answer?.status === 401) credential.token = undefined // expired: the next turn asks again
    else if (answer !== undefined) noteError(topology.counts, `call: ${answer.status} ${String(answer.json.error)}`)
    if (topology.pauseMs > 0) await sleep(topology.pauseMs)
  }
}

/**
 * Creates a service with a credential on one instance, takes a token and calls it on another,
 * deletes it on the first, then checks on every instance that neither the call nor a new token
 * request is answered 200 any more.
 */
export const lifecycleLoop = async (topology: Topology) => {
  const servicesPath = `/admin/profiles/${topology.profile}/environments/${topology.environment}/services`
  for (;;) {
    const creator = await liveServer(topology)
    if (creator === undefined) return
    const created = await admin(topology, creator, "POST", servicesPath, { name: `soak-${randomUUID().slice(0, 8)}`, auth_type: "oauth" })
    if (created === undefined) continue
    if (created.status !== 201) {
      noteError(topology.counts, `create service: ${created.status} ${String(created.json.error)}`)
      continue
    }
    const uuid = String(created.json.uuid)
    const servicePath = `${servicesPath}/${uuid}`
    const added = await admin(topology, creator, "POST", `${servicePath}/credentials`)
    let issued: string | undefined
    if (added?.status === 201) {
      const credential: Credential = { clientId: String(added.json.client_id), secret: String(added.json.client_secret), serviceUuid: uuid }
      const caller = await liveServer(topology)
      const token = caller === undefined ? undefined : await requestToken(topology, caller, credential)
      if (caller !== undefined && token?.status === 200) {
        const called = await callService(topology, caller, uuid, String(token.json.access_token))
        if (called !== undefined && called.status !== 200) noteError(topology.counts, `lifecycle call: ${called.status}`)
        issued = String(token.json.access_token)
      } else if (token !== undefined) noteError(topology.counts, `lifecycle token: ${token.status} ${String(token.json.error)}`)
    } else if (added !== undefined) noteError(topology.counts, `add credential: ${added.status} ${String(added.json.error)}`)
    // Deleted on any live instance (the creator may have been killed meanwhile).
    let deleted = false
    while (!deleted) {
      const deleter = await liveServer(topology)
      if (deleter === undefined) return
      const answer = await admin(topology, deleter, "DELETE", servicePath)
      if (answer?.status === 204) deleted = true
      else if (answer !== undefined) {
        noteError(topology.counts, `delete service: ${answer.status} ${String(answer.json.error)}`)
        break
      }
    }
    if (deleted && added?.status === 201) {
      const credential = { clientId: String(added.json.client_id), secret: String(added.json.client_secret), serviceUuid: uuid }
      for (const server of topology.servers.filter((s) => s.up)) {
        // The token issued before the deletion, and a new token request: neither may be answered 200.
        const call = issued === undefined ? undefined : await callService(topology, server, uuid, issued)
        const token = await requestToken(topology, server, credential)
        topology.counts.deletedChecked += 1
        if (token?.status === 200 || call?.status === 200) topology.counts.violations += 1
      }
    }
    topology.counts.lifecycles += 1
    if (topology.pauseMs > 0) await sleep(topology.pauseMs)
  }
}

/** A request from a chosen loopback source address, on a connection of its own. */
const fromAddress = (server: Server, localAddress: string, path: string, headers: Record<string, string>, body: string) =>
  new Promise<number | undefined>((resolve) => {
    const url = new URL(path, server.base)
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname, method: "POST", localAddress, headers, agent: false, timeout: 15_000 },
      (response) => {
        response.resume()
        response.on("end", () => resolve(response.statusCode))
      }
    )
    req.on("error", () => resolve(undefined))
    req.on("timeout", () => req.destroy())
    req.end(body)
  })

const forgedToken = () =>
  [
    Buffer.from(JSON.stringify({ alg: "RS256", kid: randomUUID() })).toString("base64url"),
    Buffer.from(JSON.stringify({ jti: randomUUID(), sub: randomUUID(), exp: 4_000_000_000 })).toString("base64url"),
    randomBytes(64).toString("base64url")
  ].join(".")

/**
 * What a caller chooses: a source address, a request id, a path, a token. Each answer must be a
 * 4xx; anything else is an error.
 */
export const noiseLoop = async (topology: Topology) => {
  for (;;) {
    const server = await liveServer(topology)
    if (server === undefined) return
    const address = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 250)}`
    const credential = pick(topology.credentials)
    const kind = topology.counts.noise % 4
    const [path, headers, body] = kind === 0
      ? [`/service/${topology.profile}/${topology.environment}/json/${credential.serviceUuid}`, {
        authorization: `Bearer ${forgedToken()}`,
        "x-request-id": randomUUID()
      }, "{}"]
      : kind === 1
      ? [`/no/such/${randomUUID()}`, { "x-request-id": randomUUID() }, "{}"]
      : kind === 2
      ? [
        "/oauth/token",
        { "content-type": "application/x-www-form-urlencoded" },
        tokenBody(topology, {
          ...credential,
          clientId: `svc_${randomBytes(16).toString("hex")}`,
          secret: randomBytes(32).toString("base64url")
        })
      ]
      : [
        `/service/${randomUUID().slice(0, 8)}/${topology.environment}/json/${randomUUID()}`,
        { authorization: `Bearer ${forgedToken()}` },
        "{}"
      ]
    const status = await fromAddress(server, address, path, { "content-type": "application/json", ...headers }, body)
    topology.counts.noise += 1
    if (status === undefined) {
      if (!server.up || snapshotting(server)) topology.counts.interrupted += 1
      else noteError(topology.counts, `noise ${kind}: no answer`)
    } else if (status < 400 || status >= 500) noteError(topology.counts, `noise ${kind}: ${status}`)
    await sleep(Math.max(topology.pauseMs, 5))
  }
}

/** The fixed catalogue the token and call loops use: `services` services with two credentials each. */
export const provision = async (topology: Omit<Topology, "credentials">, services: number): Promise<Array<Credential>> => {
  const server = topology.servers[0]!
  const must = async (method: string, path: string, body: unknown = {}) => {
    const answer = await admin({ ...topology, credentials: [] }, server, method, path, body)
    if (answer === undefined || answer.status >= 300) {
      throw new Error(`${method} ${path}: ${answer?.status} ${JSON.stringify(answer?.json)}`)
    }
    return answer.json
  }
  await must("PUT", `/admin/profiles/${topology.profile}`)
  await must("PUT", `/admin/profiles/${topology.profile}/environments/${topology.environment}`)
  const credentials: Array<Credential> = []
  for (let i = 0; i < services; i++) {
    const service = await must("POST", `/admin/profiles/${topology.profile}/environments/${topology.environment}/services`, {
      name: `soak-${i}`,
      auth_type: "oauth"
    })
    const path = `/admin/profiles/${topology.profile}/environments/${topology.environment}/services/${String(service.uuid)}/credentials`
    for (let c = 0; c < 2; c++) {
      const made = await must("POST", path)
      credentials.push({ clientId: String(made.client_id), secret: String(made.client_secret), serviceUuid: String(service.uuid) })
    }
  }
  return credentials
}
