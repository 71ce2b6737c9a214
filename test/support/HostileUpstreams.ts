/**
 * Fixtures of the hostile-tenant upstream tests: profile corp's upstream on this machine (what an
 * owner of another profile wants to reach), every way to write a loopback or internal address, an
 * owned profile with its owner token, proxy bodies and the chunked call that goes through the
 * HttpApi app rather than the fast lane.
 */
import { Effect } from "effect"
import { lookup } from "node:dns/promises"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { hostname } from "node:os"
import { expect } from "vitest"
import { ADMIN_TOKEN, type JsonResponse, serverPort, uniqueName } from "../../src/testing.js"
import { adminAs as as } from "./Http.js"

/** Profile corp's upstream, listening on loopback: it answers corp's data and remembers who asked. */
export const startCorpUpstream = async () => {
  const heard: Array<{ readonly path: string; readonly authorization: string | undefined }> = []
  const upstream = NodeHttp.createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      heard.push({ path: request.url ?? "", authorization: request.headers.authorization })
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ secret: "corp's data" }))
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
  const port = (upstream.address() as AddressInfo).port
  return {
    heard,
    port,
    origin: `http://127.0.0.1:${port}`,
    /** Whether the upstream heard a request at `path` (each test uses paths of its own). */
    reached: (path: string) => heard.some((request) => request.path === path),
    close: () => new Promise<void>((resolve) => upstream.close(() => resolve()))
  }
}

/** Every way an owner might write this machine's loopback upstream at `port` (and its neighbours) in a URL. */
export const loopbackForms = (port: number, path: string) => [
  `http://127.0.0.1:${port}${path}`,
  `http://127.1:${port}${path}`,
  `http://0177.0.0.1:${port}${path}`,
  `http://0x7f.1:${port}${path}`,
  `http://2130706433:${port}${path}`,
  `http://localhost:${port}${path}`,
  `http://LocalHost.:${port}${path}`,
  `http://corp.localhost:${port}${path}`,
  `http://[::1]:${port}${path}`,
  `http://[::ffff:127.0.0.1]:${port}${path}`,
  `http://[::ffff:7f00:1]:${port}${path}`,
  `http://[64:ff9b::7f00:1]:${port}${path}`,
  `http://0.0.0.0:${port}${path}`,
  `http://169.254.169.254/latest/meta-data${path}`,
  `http://[fd00:ec2::254]/latest/meta-data${path}`,
  `http://10.0.0.1${path}`,
  `http://192.168.1.1${path}`
]

export const root = as(ADMIN_TOKEN)

export const expectStatus = (response: JsonResponse, status: number) =>
  expect({ status: response.status, text: response.text }).toEqual({ status, text: expect.any(String) })

/** A profile with environment prod, made by the admin, and an owner token for it. */
export const givenOwnedProfile = (prefix: string) =>
  Effect.gen(function*() {
    const profile = uniqueName(prefix)
    expectStatus(yield* root.put(`/admin/profiles/${profile}`), 201)
    expectStatus(yield* root.put(`/admin/profiles/${profile}/environments/prod`), 201)
    const token = yield* root.post("/admin/tokens", { name: uniqueName("owner"), role: "owner", profiles: [profile] })
    expectStatus(token, 201)
    return { profile, owner: as(token.body.token as string), services: `/admin/profiles/${profile}/environments/prod/services` }
  })

/** The service-call path of a service document answered by the admin API. */
export const callPathOf = (profile: string, service: JsonResponse) => `/service/${profile}/prod/json/${service.body.uuid}`

export const proxy = (url: string, headers?: Record<string, string>) => ({
  auth_type: "none",
  handler: { type: "proxy", url, ...(headers === undefined ? {} : { headers }) }
})

export const STOLEN = { Authorization: "Bearer stolen-from-corp" }
export const NOT_ALLOWED = { error: "bad_gateway", error_description: "The upstream address is not allowed for this service" }

/** A chunked body goes through the HttpApi app rather than the fast lane: both must refuse alike. */
export const callChunked = (path: string) =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const request = NodeHttp.request(
          {
            host: "127.0.0.1",
            port,
            path,
            method: "POST",
            headers: { "content-type": "application/json", "transfer-encoding": "chunked" }
          },
          (response) => {
            const chunks: Array<Buffer> = []
            response.on("data", (chunk: Buffer) => chunks.push(chunk))
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }))
          }
        )
        request.on("error", reject)
        request.write("{}")
        request.end()
      })
    ))

/** This machine's name, when /etc/hosts makes it resolve to loopback (most do); undefined otherwise. */
export const loopbackName = await lookup(hostname(), { all: true }).then(
  (
    addresses
  ) => (addresses.length > 0 && addresses.every((a) => a.address.startsWith("127.") || a.address === "::1") ? hostname() : undefined),
  () => undefined
)
