/**
 * The fast lane: the success path of the two hot endpoints, answered straight from memory on
 * node:http, in front of the HttpApi app.
 *
 * A profile of the token endpoint and the service call under load showed most of the event loop's
 * time in the framework around the handlers (request and response wrappers, the router, fibers and
 * their context), not in the handlers' own work: a bare node:http answer costs a fifth of the
 * platform's. So, for a request whose every input is already in memory (the service route and the
 * credential in the repository's exact cache, a verified token, the built-in echo handler, a body
 * within its declared size), the same checks are made here with the same functions (`verifyAt`,
 * `formFields`, `clientCredentials`, `jsonObject`, `ClientSecrets.matches`...) and the answer is
 * written directly. Everything else is handed to the HttpApi app (`next`), which answers it as
 * always: every failure, every storage read or write (a cache miss, `last_used_at` to record),
 * proxies and handlers registered in code, chunked or oversized bodies, odd paths. A body the lane
 * has already read is handed over with the request (`rememberBody`). With LOG_LEVEL=debug the lane
 * is off, so every request is logged by the app; so it is while traces are exported (an OTLP
 * endpoint is set), so every request has its spans. What the lane answers it also records in the
 * metrics (`ServiceMetrics`), as the app records what it answers: each request is counted once.
 */
import { Context, Effect, Either, Layer, LogLevel, Option } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { performance } from "node:perf_hooks"
import { AppConfig } from "../AppConfig.js"
import { AuthFailureLimiter } from "../auth/AuthFailureLimiter.js"
import { lastUsedIsStale } from "../auth/ClientCredentialsGrant.js"
import { ClientSecrets } from "../auth/ClientSecrets.js"
import { TokenService } from "../auth/TokenService.js"
import { type ClientId, isClientId } from "../domain/Identifiers.js"
import { echo, ServiceHandlers } from "../gateway/ServiceHandlers.js"
import { recorderOf } from "../metrics/ServiceMetrics.js"
import { CredentialRepo, serviceAddress } from "../storage/CredentialRepo.js"
import { clientAddress } from "./ClientAddress.js"
import { mediaTypeOf, rememberBody } from "./RequestBody.js"
import { SERVICE_ROUTE, TOKEN_ROUTE } from "./RequestMetrics.js"
import { jsonObject, presentedCredentials, SERVICE_ANSWER_HEADERS } from "./ServiceHttp.js"
import { clientCredentials, formFields, NO_STORE, tokenAnswer } from "./TokenHttp.js"

/** Answers the request and returns, or calls `next` to let the HttpApi app answer it. */
export type FastLaneShape = (request: IncomingMessage, response: ServerResponse, next: () => void) => void

export class FastLane extends Context.Tag("service-auth/FastLane")<FastLane, FastLaneShape>() {}

/** Only plain paths: percent-encoded or otherwise unusual ones go to the router, which decodes them. */
const SERVICE_PATH = /^\/service\/([A-Za-z0-9._-]+)\/([A-Za-z0-9._-]+)\/json\/([0-9A-Fa-f-]{36})$/

/** Writes a JSON answer the way the platform writes one: the same headers, in the same order. */
const answerJson = (
  response: ServerResponse,
  headers: Readonly<Record<string, string>>,
  body: unknown
) => {
  const text = JSON.stringify(body)
  response.writeHead(200, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  response.end(text)
}

/** The declared length when the body has one within the limit; chunked or larger bodies are the app's. */
const declaredLength = (request: IncomingMessage, maxBytes: number): number | undefined => {
  const declared = request.headers["content-length"]
  if (declared === undefined || request.headers["transfer-encoding"] !== undefined) return undefined
  const length = Number(declared)
  return Number.isInteger(length) && length >= 0 && length <= maxBytes ? length : undefined
}

/**
 * Runs part of the lane's work; if it throws, the request goes to the app (which answers it as it
 * would have), or, when an answer was already begun, the connection is closed. An exception must
 * never escape into Node's request event, where it would stop the process.
 */
const guarded = (response: ServerResponse, next: () => void, work: () => void) => {
  try {
    work()
  } catch {
    if (response.headersSent) response.destroy()
    else next()
  }
}

/** Reads the whole body and hands it to `then` (guarded); the body travels with the request to the app. */
const readBody = (request: IncomingMessage, response: ServerResponse, next: () => void, then: (text: string) => void) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.once("end", () => {
    const text = Buffer.concat(chunks).toString("utf8")
    rememberBody(request, text)
    guarded(response, next, () => then(text))
  })
  request.once("error", () => response.destroy())
}

const make = Effect.gen(function*() {
  const config = yield* AppConfig
  const repo = yield* CredentialRepo
  const tokens = yield* TokenService
  const secrets = yield* ClientSecrets
  const limiter = yield* AuthFailureLimiter
  const handlers = yield* ServiceHandlers
  const peek = repo.peek
  const enabled = peek !== undefined && LogLevel.greaterThan(config.logLevel, LogLevel.Debug) &&
    Option.isNone(config.tracing)
  const recordIssuedToken = recorderOf({ route: TOKEN_ROUTE, counter: "token" })
  const recordServedCall = recorderOf({ route: SERVICE_ROUTE, counter: "call" })

  const serviceCall = (
    request: IncomingMessage,
    response: ServerResponse,
    next: () => void,
    path: RegExpExecArray,
    started: number
  ) => {
    const address = serviceAddress(path[1]!, path[2]!, path[3]!)
    if (address === undefined || peek === undefined || declaredLength(request, config.maxBodyBytes) === undefined) {
      return next()
    }
    const presented = presentedCredentials(request.headers["authorization"])
    const verified = presented._tag === "Bearer" ? tokens.verifyAt(presented.token, Date.now()) : undefined
    const clientId: Option.Option<ClientId> = verified !== undefined && Either.isRight(verified)
      ? Option.some(verified.right.client_id)
      : Option.none()
    const route = peek.serviceRoute(address, clientId)
    if (route === undefined || Option.isNone(route)) return next()
    let caller: string | null = null
    if (route.value.authType === "oauth") {
      if (
        verified === undefined || Either.isLeft(verified) || !tokens.isForService(verified.right, address) ||
        !route.value.credentialLive
      ) return next()
      caller = verified.right.client_id
    }
    if (handlers.resolve(address, route.value.handler) !== echo) return next()
    readBody(request, response, next, (text) => {
      const body = jsonObject(text)
      if (Either.isLeft(body)) return next()
      answerJson(response, SERVICE_ANSWER_HEADERS, {
        service_uuid: address.uuid,
        profile: address.profile,
        environment: address.environment,
        client_id: caller,
        body: body.right
      })
      recordServedCall((performance.now() - started) / 1000)
    })
  }

  const token = (request: IncomingMessage, response: ServerResponse, next: () => void, started: number) => {
    if (
      peek === undefined || mediaTypeOf(request.headers["content-type"]) !== "application/x-www-form-urlencoded" ||
      declaredLength(request, config.maxBodyBytes) === undefined
    ) return next()
    readBody(request, response, next, (text) => {
      const fields = formFields(text)
      if (Either.isLeft(fields) || fields.right.grant_type !== "client_credentials") return next()
      const client = clientCredentials(request.headers["authorization"], fields.right)
      const { profile, environment, service_uuid } = fields.right
      if (
        Either.isLeft(client) || client.right === undefined || Option.isNone(client.right.clientSecret) ||
        profile === undefined || environment === undefined || service_uuid === undefined
      ) return next()
      const { clientId, clientSecret } = client.right
      const now = Date.now()
      const address = serviceAddress(profile, environment, service_uuid)
      if (
        address === undefined || !isClientId(clientId) ||
        Option.isSome(limiter.blockedAt(clientId, clientAddress(request), now))
      ) return next()
      const target = peek.tokenTarget(address, Option.some(clientId))
      if (target === undefined || Option.isNone(target) || target.value.authType !== "oauth") return next()
      const credential = Option.getOrUndefined(target.value.credential)
      // A failure, or a last_used_at to record, is the app's: it counts failures and writes.
      if (
        credential === undefined || !secrets.matches(clientSecret.value, credential.secretHash) ||
        lastUsedIsStale(credential.lastUsedAt, now)
      ) return next()
      tokens.issueAt(credential.clientId, address, now).then(
        (issued) =>
          guarded(response, next, () => {
            answerJson(response, NO_STORE, tokenAnswer(issued))
            recordIssuedToken((performance.now() - started) / 1000)
          }),
        () => next()
      )
    })
  }

  const lane: FastLaneShape = (request, response, next) => {
    if (!enabled || request.method !== "POST") return next()
    // The app answers a request at most once, whatever happens here.
    let handedOver = false
    const handOver = () => {
      if (handedOver) return
      handedOver = true
      next()
    }
    const started = performance.now()
    guarded(response, handOver, () => {
      const url = request.url ?? ""
      if (url === "/oauth/token") return token(request, response, handOver, started)
      const path = SERVICE_PATH.exec(url)
      return path === null ? handOver() : serviceCall(request, response, handOver, path, started)
    })
  }
  return lane
})

export const layer = Layer.effect(FastLane, make)
