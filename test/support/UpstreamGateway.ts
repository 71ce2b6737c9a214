/**
 * The recording upstream of the gateway tests (`RecordingUpstream.mjs`, one process per file: each
 * file calls `startUpstream`/`stopUpstream` in its hooks), and the services and calls in front of it.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { callThroughApp as callAppEntry } from "./AppEntry.js"
import { admin, createFixture, type Fixture, issueToken, type JsonResponse } from "../../src/testing.js"
import { callPath, callService } from "./Tokens.js"

let child: ChildProcess | undefined

export let upstreamPort = 0

/** Starts the upstream process; `upstreamPort` is its port from then on. */
export const startUpstream = async () => {
  child = spawn(process.execPath, [fileURLToPath(new URL("./RecordingUpstream.mjs", import.meta.url))], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  upstreamPort = await new Promise<number>((resolve, reject) => {
    child!.stdout!.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())))
    child!.once("exit", () => reject(new Error("the upstream exited")))
  })
}

export const stopUpstream = () => {
  child?.kill("SIGTERM")
}

export interface Received {
  readonly method: string
  readonly headers: Record<string, string>
  readonly body: string
}

export interface Mode {
  readonly status?: number
  readonly body?: unknown
  readonly text?: string
  readonly retryAfter?: string
  readonly hold?: boolean
  readonly drop?: boolean
}

export const control = (method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${upstreamPort}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return response.json() as Promise<any>
  })

export const upstream = {
  url: (key: string) => `http://127.0.0.1:${upstreamPort}/svc/${key}`,
  mode: (key: string, mode: Mode) => control("PUT", `/__mode/${key}`, mode),
  received: (key: string) => control("GET", `/__received/${key}`) as Effect.Effect<Array<Received>>,
  held: (key: string) => Effect.map(control("GET", `/__held/${key}`), (answer) => answer.held as number),
  release: (key: string) => control("POST", `/__release/${key}`)
}

/** Waits (without a fixed sleep) until `check` holds. */
export const eventually = <A>(read: Effect.Effect<A>, check: (value: A) => boolean) =>
  Effect.promise(async () => {
    for (let attempt = 0; attempt < 400; attempt++) {
      const value = await Effect.runPromise(read)
      if (check(value)) return value
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    throw new Error("condition not reached")
  })

// Services and calls

export let keys = 0

export const freshKey = () => `k${process.pid}-${++keys}`

export const proxyService = (handler: Record<string, unknown> = {}, authType: "oauth" | "none" = "oauth") =>
  Effect.gen(function*() {
    const key = freshKey()
    const stored = { type: "proxy", url: upstream.url(key), ...handler }
    const fixture = yield* createFixture({ handler: stored })
    // createFixture makes an oauth service (to add its credential), then switches.
    if (authType === "none") yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "none", handler: stored })
    const token = authType === "oauth" ? yield* issueToken(fixture) : undefined
    return { key, fixture, token }
  })

/** A service call through the HttpApi app. */
export const callThroughApp = (fixture: Fixture, token: string | undefined, body = "{}", headers: Record<string, string> = {}) =>
  callAppEntry(callPath(fixture), token, headers, body)

export type Caller = (
  fixture: Fixture,
  token: string | undefined,
  body?: string,
  headers?: Record<string, string>
) => Effect.Effect<JsonResponse, never, any>

export const throughLane: Caller = (fixture, token, body = "{}", headers = {}) => callService(callPath(fixture), { token, body, headers })

export const ENTRIES: ReadonlyArray<readonly [string, Caller]> = [["fast lane", throughLane], ["app", callThroughApp]]

export const FAILING = { error: "temporarily_unavailable", error_description: "The upstream service is failing; retry later" }
