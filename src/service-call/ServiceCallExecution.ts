/**
 * `POST /service/{profile}/{env}/json/{uuid}`, executed once for both entries (the fast lane and the
 * HttpApi handler, which only read the request and write the answer this returns): the server span,
 * the decision (`decideServiceCall`) and what completes it in Effect (`ServiceCallGate.complete`), the
 * body (read only once the call is let through, RFC 6750), the handler (echo and proxy here, a
 * handler registered in code in Effect), the caller's leaving reaching the upstream, the answer with
 * its rate-limit headers, the metrics and the debug line.
 */
import { Cause, Effect, Either, type Tracer } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { authorizationHeader } from "../domain/AuthorizationHeader.js"
import { dpopHeader } from "../token/DPoPProof.js"
import { type Answer, errorAnswer, SERVICE_ANSWER_HEADERS } from "../domain/Answer.js"
import { BadGateway, type InvalidRequest, type PayloadTooLarge } from "../domain/Errors.js"
import { spanAttributes } from "../domain/ServiceAddress.js"
import {
  decideServiceCall,
  jsonObject,
  type ServiceCallAllowed,
  type ServiceCallInput,
  type ServiceCallVerdict,
  withRateHeaders
} from "./ServiceCallDecision.js"
import { ServiceCallGate } from "./ServiceCallGate.js"
import { echoOf, type JsonObject, ServiceHandlers, traceparentOf } from "./ServiceHandlers.js"
import { UpstreamGateway } from "./proxy/UpstreamGateway.js"
import { describeDefect } from "../observability/Defects.js"
import { recordServiceCall } from "../observability/ServiceMetrics.js"
import { whenResponseClosed } from "./CallerGone.js"
import { clientAddress } from "../server/ClientAddress.js"
import type { ExecutionKit } from "../server/ExecutionKit.js"
import { annotateRequest, endUpstreamSpan, laneRequestSpan, startUpstreamSpan } from "../observability/LaneTrace.js"
import { SERVICE_ROUTE } from "../server/RequestMetrics.js"

/** The body as an entry read it: its text within the size limit, or why it could not be read. */
export type BodyRead = Either.Either<string, PayloadTooLarge | InvalidRequest>

/** What an entry read of a service call besides its headers. */
export interface ServiceCallRequest {
  readonly request: IncomingMessage
  /** The response the answer will be written on: its closing before the answer means the caller left. */
  readonly response: ServerResponse
  readonly path: { readonly profile: string; readonly environment: string; readonly uuid: string }
  /** Reads the body, once, when the call is let through; not called when it is refused. */
  readonly readBody: (then: (body: BodyRead) => void) => void
  readonly nowMillis: number
  /** `process.hrtime.bigint()` when the request arrived. */
  readonly started: bigint
}

/**
 * Answers the call through `answered`, once, which says whether the answer reached the caller (a
 * caller that left is not recorded); `failed` when it cannot be answered (a defect).
 */
export type ServiceCallExecutionShape = (
  call: ServiceCallRequest,
  answered: (answer: Answer) => boolean,
  failed: (defect: unknown) => void
) => void

export const makeServiceCallExecution = (kit: ExecutionKit) =>
  Effect.gen(function*() {
    const gate = yield* ServiceCallGate
    const handlers = yield* ServiceHandlers
    const upstreams = yield* UpstreamGateway
    const { tracer, run, below, cacheSpanned, record, requestIdOf } = kit

    /** A handler registered in code, in Effect: its object (200), its failure, or 502 when it throws. */
    const registered = (allowed: ServiceCallAllowed, body: JsonObject, bodyText: string): Effect.Effect<Answer> =>
      Effect.suspend(() => handlers.resolve(allowed.address)({ address: allowed.address, clientId: allowed.caller, body, bodyText })).pipe(
        Effect.map((answer): Answer => ({ status: 200, headers: SERVICE_ANSWER_HEADERS, body: answer })),
        Effect.catchAll((error) => Effect.succeed(errorAnswer(error))),
        // A handler registered in code that throws has failed, like one that fails: 502, not 500.
        Effect.catchAllDefect((defect) =>
          Effect.as(
            Effect.logError(`Service handler failed: ${describeDefect(Cause.die(defect))}`),
            errorAnswer(new BadGateway({ description: "The service's handler failed" }))
          )
        )
      )

    /** The handler's answer: echo and proxy here, a handler registered in code in Effect. */
    const callHandler = (
      { request, response }: ServiceCallRequest,
      allowed: ServiceCallAllowed,
      body: JsonObject,
      text: string,
      span: Tracer.Span | undefined,
      done: (answer: Answer) => void,
      failed: (defect: unknown) => void
    ) => {
      const { address, route, caller } = allowed
      const handler = route.handler
      // The stored handler type: a handler registered in code for this service runs in its place.
      annotateRequest(span, { "service_auth.handler.configured": handler.type })
      if (handlers.isRegistered(address) || (handler.type !== "echo" && handler.type !== "proxy")) {
        return void run(below(registered(allowed, body, text), span)).then(done).catch(failed)
      }
      if (handler.type === "echo") {
        return done({ status: 200, headers: SERVICE_ANSWER_HEADERS, body: echoOf({ address, clientId: caller, body }) })
      }
      // While traces are exported, the upstream call has its own client span and the upstream
      // continues the trace, sampled or not as the request's span was (not sampled: flagged 00).
      const upstreamSpan = tracer === undefined || span === undefined ? undefined : startUpstreamSpan(tracer, span, handler.url)
      const traceparent = upstreamSpan === undefined ? undefined : traceparentOf(upstreamSpan)
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
        endUpstreamSpan(upstreamSpan, called.status)
        done(called.answer)
      }).catch((defect) => {
        endUpstreamSpan(upstreamSpan, undefined)
        failed(defect)
      })
    }

    const execute: ServiceCallExecutionShape = (call, answered, failed) => {
      const { request, path, nowMillis, started } = call
      const span = laneRequestSpan(tracer, request, SERVICE_ROUTE, (request.url ?? "").split("?")[0]!, started)
      const done = (answer: Answer) => {
        if (!answered(answer)) return
        recordServiceCall(answer.status)
        record(request, SERVICE_ROUTE, started, answer, span)
      }
      const input: ServiceCallInput = {
        profile: path.profile,
        environment: path.environment,
        uuid: path.uuid,
        authorization: authorizationHeader(request),
        dpop: dpopHeader(request.headers["dpop"]),
        remoteAddress: clientAddress(request),
        nowMillis
      }
      const proceed = (verdict: ServiceCallVerdict) => {
        // Refused before the body is read (RFC 6750).
        if (verdict._tag === "Answer") return done(verdict.answer)
        annotateRequest(span, spanAttributes(verdict.address, verdict.clientId))
        // A service with a rate limit: every answer of the call carries its fields.
        const answer = verdict.rateHeaders === undefined ? done : (answer: Answer) => done(withRateHeaders(verdict, answer))
        call.readBody((text) => {
          const body = Either.flatMap(text, jsonObject)
          if (Either.isLeft(body)) return answer(errorAnswer(body.left))
          callHandler(call, verdict, body.right, Either.getOrElse(text, () => ""), span, answer, failed)
        })
      }
      const decision = decideServiceCall(
        input,
        span === undefined || !span.sampled ? gate.services : {
          ...gate.services,
          serviceRoute: cacheSpanned(span, "CredentialRepoCache.findServiceRoute", gate.services.serviceRoute)
        }
      )
      if (decision._tag === "Answer" || decision._tag === "Call") return proceed(decision)
      run(below(gate.complete(input, decision), span)).then(proceed).catch(failed)
    }
    return execute
  })
