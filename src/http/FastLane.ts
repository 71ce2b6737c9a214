/**
 * The fast path: the two hot endpoints (`POST /oauth/token` and the service call) answered on
 * node:http, in front of the HttpApi app, by the same decisions the app's handlers call
 * (`decideToken`, `decideServiceCall`): this file only reads the request, writes the answer, and
 * records it (metrics, spans, the debug line), so the order of checks exists once.
 *
 * A profile of both endpoints under load put most of the event loop's time in the framework around
 * the handlers (request and response wrappers, the router, fibers and their context), not in the
 * handlers' own work. So a decision that needs nothing but memory is answered here synchronously
 * (a signature aside); one that needs storage (a catalogue miss, a key to learn, a failure to
 * count, `last_used_at` to record) or a handler registered in code is carried to its end by the
 * same services in Effect (`ClientCredentialsGrant.complete`, `ServiceCallGate`), on the runtime the
 * app runs on, and still answered here. A proxy's upstream is called over pooled connections
 * (`Upstream`). Spans are made here when traces are exported (`LaneTrace`), and the debug line
 * when LOG_LEVEL=debug: neither switches paths.
 *
 * What the lane does not take is handed to the app (`next`), which answers it by the same
 * decisions: other methods and paths, percent-encoded paths, chunked bodies or bodies over the
 * limit (the app's 413 closes the connection). A body the lane has already read travels with the
 * request (`rememberBody`).
 */
import { Context, Effect, Either, Layer, Option, Runtime, type Tracer } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { AppConfig } from "../config/AppConfig.js"
import { authorizationHeader } from "../auth/AuthorizationHeader.js"
import { ClientCredentialsGrant, decideToken, type TokenInput } from "../auth/ClientCredentialsGrant.js"
import { dpopHeader } from "../auth/DPoPProof.js"
import { NO_STORE, tokenAnswer } from "../auth/TokenForm.js"
import { SIGNATURE_ATTRIBUTES as SIGNED, TokenService } from "../auth/TokenService.js"
import type { ClientId } from "../domain/Identifiers.js"
import {
  decideServiceCall,
  withRateHeaders,
  jsonObject,
  type ServiceCallAllowed,
  type ServiceCallInput
} from "../gateway/ServiceCallDecision.js"
import { ServiceCallGate } from "../gateway/ServiceCallGate.js"
import { echoOf, ServiceHandlers, traceparentOf } from "../gateway/ServiceHandlers.js"
import { UpstreamGateway } from "../gateway/UpstreamGateway.js"
import { handlerAttributes } from "../observability/Tracing.js"
import { recordDuration, recordServiceCall, recordTokenRequest, type TokenResult } from "../observability/ServiceMetrics.js"
import { UsageRecord } from "../storage/UsageRecord.js"
import { spanAttributes } from "../domain/ServiceAddress.js"
import { writeAnswer } from "./Answer.js"
import { type Answer, errorAnswer, SERVICE_ANSWER_HEADERS } from "../domain/Answer.js"
import { whenResponseClosed } from "./CallerGone.js"
import { clientAddress } from "./ClientAddress.js"
import {
  annotateRequest,
  cacheHitEvent,
  endRequestSpan,
  endUpstreamSpan,
  type LaneTracer,
  laneRequestSpan,
  startUpstreamSpan
} from "./LaneTrace.js"
import { mediaTypeOf, rememberBody } from "./RequestBody.js"
import { RequestIds } from "./RequestId.js"
import { requestLogLine } from "./RequestLog.js"
import { SERVICE_ROUTE, TOKEN_ROUTE } from "./RequestMetrics.js"

/** Answers the request and returns, or calls `next` to let the HttpApi app answer it. */
export type FastLaneShape = (request: IncomingMessage, response: ServerResponse, next: () => void) => void

export class FastLane extends Context.Tag("service-auth/FastLane")<FastLane, FastLaneShape>() {}

/** Only plain paths: percent-encoded or otherwise unusual ones go to the router, which decodes them. */
const SERVICE_PATH = /^\/service\/([A-Za-z0-9._-]+)\/([A-Za-z0-9._-]+)\/json\/([0-9A-Fa-f-]{36})$/

/** The declared length when the body has one within the limit; chunked or larger bodies are the app's. */
const declaredLength = (request: IncomingMessage, maxBytes: number): number | undefined => {
  const declared = request.headers["content-length"]
  if (declared === undefined || request.headers["transfer-encoding"] !== undefined) return undefined
  const length = Number(declared)
  return Number.isInteger(length) && length >= 0 && length <= maxBytes ? length : undefined
}

const make = Effect.gen(function*() {
  const config = yield* AppConfig
  const grants = yield* ClientCredentialsGrant
  const gate = yield* ServiceCallGate
  const tokens = yield* TokenService
  const handlers = yield* ServiceHandlers
  const upstreams = yield* UpstreamGateway
  const requestIdOf = yield* RequestIds
  // `last_used_at` recorded synchronously where storage can (a catalogue spread over many credentials
  // makes most token requests some credential's first in a minute); otherwise in Effect.
  const { recordUseSync } = yield* UsageRecord
  const recordUse = (clientId: ClientId, nowMillis: number) =>
    recordUseSync !== undefined && (recordUseSync(clientId, new Date(nowMillis)), true)
  // The app's runtime (its tracer, logger, log level, clock): what needs Effect runs on it.
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runPromise(runtime)
  const clock = yield* Effect.clock
  const tracer: LaneTracer = Option.isSome(config.tracing) ? yield* Effect.tracer : undefined

  /** Work carried on in Effect, below the request's span (sampled or not: its spans follow it). */
  const below = <A, E>(effect: Effect.Effect<A, E>, span: Tracer.Span | undefined) =>
    span === undefined ? effect : Effect.withParentSpan(effect, span)
  const logged = yield* Effect.map(Effect.whenLogLevel(Effect.void, "Debug"), Option.isSome)

  /** A sampled request's catalogue read answered by the cache: an event, as the cache's own reads record. */
  const cacheSpanned = <A extends ReadonlyArray<unknown>, B>(
    parent: Tracer.Span,
    name: string,
    read: (...args: A) => B | undefined
  ) =>
  (...args: A): B | undefined => {
    const held = read(...args)
    if (held !== undefined) cacheHitEvent(parent, name)
    return held
  }

  /** Writes the answer and records it, once, however the request ended up answered. */
  const finish = (
    request: IncomingMessage,
    response: ServerResponse,
    route: string,
    started: bigint,
    answer: Answer,
    span: Tracer.Span | undefined
  ) => {
    if (response.headersSent || response.destroyed) return
    writeAnswer(response, answer)
    const elapsedNs = process.hrtime.bigint() - started
    recordDuration(route, Number(elapsedNs) / 1e9)
    endRequestSpan(span, answer.status)
    if (logged) {
      Runtime.runFork(runtime)(
        requestLogLine("POST", request.url ?? "", answer.status, Number(elapsedNs / 1_000_000n), clientAddress(request), requestIdOf(request))
      )
    }
  }

  /**
   * Reads the declared-length body. `then` is guarded: if it throws, the app answers (the request is
   * handed over once, with the body read, which it cannot read again) or, when an answer has begun,
   * the connection is closed. An exception must never escape into a Node event handler.
   */
  const readBody = (request: IncomingMessage, response: ServerResponse, next: () => void, then: (text: string) => void) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.once("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      try {
        then(text)
      } catch {
        if (response.headersSent) response.destroy()
        else {
          rememberBody(request, text)
          next()
        }
      }
    })
    request.once("error", () => response.destroy())
  }

  const token = (request: IncomingMessage, response: ServerResponse, next: () => void, started: bigint) => {
    const span = laneRequestSpan(tracer, request, TOKEN_ROUTE, "/oauth/token", started)
    const done = (outcome: { readonly answer: Answer; readonly result: TokenResult }) => {
      if (response.headersSent) return
      recordTokenRequest(outcome.result)
      finish(request, response, TOKEN_ROUTE, started, outcome.answer, span)
    }
    readBody(request, response, next, (text) => {
      const input: TokenInput = {
        authorization: authorizationHeader(request),
        dpop: dpopHeader(request.headers["dpop"]),
        form: mediaTypeOf(request.headers["content-type"]) === "application/x-www-form-urlencoded" ? text : undefined,
        remoteAddress: clientAddress(request),
        nowMillis: clock.unsafeCurrentTimeMillis()
      }
      const decision = decideToken(input, span === undefined || !span.sampled ? grants.services : {
        ...grants.services,
        tokenTarget: cacheSpanned(span, "CredentialRepoCache.findTokenTarget", grants.services.tokenTarget)
      })
      if (decision._tag === "Answer") return done(decision)
      if (decision._tag === "Issue" && (!decision.recordUse || recordUse(decision.clientId, input.nowMillis))) {
        // All in memory: only the signature remains (on the thread pool).
        if (span?.sampled) annotateRequest(span, { ...spanAttributes(decision.address, Option.some(decision.clientId)), ...SIGNED })
        return void tokens.issueAt(decision.clientId, decision.address, input.nowMillis).then((issued) => {
          done({ answer: { status: 200, headers: NO_STORE, body: tokenAnswer(issued) }, result: "issued" })
        }).catch(() => response.destroy())
      }
      run(below(grants.complete(input, decision), span)).then(done).catch(() => response.destroy())
    })
  }

  /** The handler's answer: echo and proxy here, a handler registered in code in Effect. */
  const callHandler = (
    request: IncomingMessage,
    response: ServerResponse,
    allowed: ServiceCallAllowed,
    text: string,
    span: Tracer.Span | undefined,
    done: (answer: Answer) => void,
    failed: () => void
  ) => {
    const body = jsonObject(text)
    if (Either.isLeft(body)) return done(errorAnswer(body.left))
    const { address, route, caller } = allowed
    const handler = route.handler
    if (handlers.isRegistered(address) || (handler.type !== "echo" && handler.type !== "proxy")) {
      return void run(below(gate.call(allowed, body.right, text, requestIdOf(request)), span)).then(done).catch(failed)
    }
    if (span?.sampled) annotateRequest(span, handlerAttributes(handler.type))
    if (handler.type === "echo") {
      return done({ status: 200, headers: SERVICE_ANSWER_HEADERS, body: echoOf({ address, clientId: caller, body: body.right }) })
    }
    // While traces are exported, the upstream continues the trace, sampled or not as decided here
    // (not sampled: the caller's trace id, or a new one, flagged 00).
    const proxySpan = tracer && span && startUpstreamSpan(tracer, span, handler.url)
    const traceparent = proxySpan && traceparentOf(proxySpan)
    upstreams.call({
      address,
      handler,
      clientId: caller,
      approved: route.upstreamApproved,
      profileOrigins: route.upstreamOrigins,
      bodyText: text,
      requestId: requestIdOf(request),
      whenCallerGone: whenResponseClosed(response),
      ...(traceparent === undefined ? {} : { traceparent })
    }).then((called) => {
      endUpstreamSpan(proxySpan, called.status)
      done(called.answer)
    }).catch(failed)
  }

  const serviceCall = (
    request: IncomingMessage,
    response: ServerResponse,
    next: () => void,
    path: RegExpExecArray,
    started: bigint
  ) => {
    const url = request.url ?? ""
    const span = laneRequestSpan(tracer, request, SERVICE_ROUTE, url, started)
    const done = (answer: Answer) => {
      if (response.headersSent) return
      recordServiceCall(answer.status)
      finish(request, response, SERVICE_ROUTE, started, answer, span)
    }
    const failed = () => response.destroy()
    const input: ServiceCallInput = {
      profile: path[1]!,
      environment: path[2]!,
      uuid: path[3]!,
      authorization: authorizationHeader(request),
      dpop: dpopHeader(request.headers["dpop"]),
      remoteAddress: clientAddress(request),
      nowMillis: clock.unsafeCurrentTimeMillis()
    }
    const proceed = (verdict: ReturnType<typeof decideServiceCall>) => {
      if (verdict._tag === "Answer") {
        // Refused before the body is read (RFC 6750); Node discards the unread body.
        request.resume()
        return done(verdict.answer)
      }
      if (verdict._tag !== "Call") return failed()
      if (span?.sampled) annotateRequest(span, spanAttributes(verdict.address, verdict.clientId))
      // A service with a rate limit: every answer of the call carries its fields.
      const answered = verdict.rateHeaders === undefined ? done : (answer: Answer) => done(withRateHeaders(verdict, answer))
      readBody(request, response, next, (text) => callHandler(request, response, verdict, text, span, answered, failed))
    }
    const decision = decideServiceCall(input, span === undefined || !span.sampled ? gate.services : {
      ...gate.services,
      serviceRoute: cacheSpanned(span, "CredentialRepoCache.findServiceRoute", gate.services.serviceRoute)
    })
    if (decision._tag === "Answer" || decision._tag === "Call") return proceed(decision)
    run(below(gate.complete(input, decision), span)).then(proceed).catch(failed)
  }

  const lane: FastLaneShape = (request, response, next) => {
    if (request.method !== "POST" || declaredLength(request, config.maxBodyBytes) === undefined) return next()
    const url = request.url ?? ""
    const started = process.hrtime.bigint()
    // The app answers a request at most once, whatever happens here.
    let handedOver = false
    const handOver = () => {
      if (handedOver) return
      handedOver = true
      next()
    }
    // An exception must never escape into Node's request event, where it would stop the process:
    // the app answers instead (a body already read travels with the request), or, when an answer
    // has begun, the connection is closed.
    try {
      if (url === "/oauth/token") return token(request, response, handOver, started)
      const path = SERVICE_PATH.exec(url)
      if (path === null) return handOver()
      return serviceCall(request, response, handOver, path, started)
    } catch {
      if (response.headersSent) response.destroy()
      else handOver()
    }
  }
  return lane
})

export const layer = Layer.effect(FastLane, make)
