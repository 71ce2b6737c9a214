/**
 * `ServiceCallGate`: the service call's decision (`ServiceCallDecision`) run in Effect for the
 * HttpApi entry and completed for both entries: it learns an unknown signing key, reads the route the
 * catalogue cache did not hold, checks a DPoP proof, and calls the service's handler (a handler
 * registered in code, or the stored echo or proxy) in the spans traces export.
 */
import { Cause, Context, Effect, Layer } from "effect"
import { CallUse } from "../auth/CallUse.js"
import { TokenService } from "../auth/TokenService.js"
import { BadGateway } from "../domain/Errors.js"
import { type Answer, errorAnswer, SERVICE_ANSWER_HEADERS } from "../domain/Answer.js"
import { describeDefect } from "../observability/Defects.js"
import { CatalogueLookup } from "../storage/CatalogueLookup.js"
import { spanAttributes } from "../domain/ServiceAddress.js"
import { UPSTREAM_SPAN, upstreamSpanOptions } from "../observability/RequestTracer.js"
import { handlerAttributes, tracerEnabled, watchedCacheRead } from "../observability/Tracing.js"
import { AppConfig } from "../config/AppConfig.js"
import { makeProofVerifier } from "../auth/DPoPProof.js"
import { SeenJtis } from "../storage/SeenJtis.js"
import { dpopRefusal, wrongProofKey } from "./DPoPBinding.js"
import { type JsonObject, ServiceHandlers, traceparentOf, upstreamAttributes } from "./ServiceHandlers.js"
import { whenAborted } from "./Upstream.js"
import { RateLimits } from "./RateLimits.js"
import { type ProxyHandler, UpstreamGateway } from "./UpstreamGateway.js"
import {
  admitCall,
  decideServiceCall,
  type ServiceCallAllowed,
  type ServiceCallDecision,
  type ServiceCallInput,
  type ServiceCallServices,
  type ServiceCallVerdict
} from "./ServiceCallDecision.js"

export interface ServiceCallGateShape {
  readonly services: ServiceCallServices
  /**
   * Carries a decision to an answer or a call: learns an unknown key, reads the route the cache did
   * not hold, and decides again. A storage failure is answered 503.
   */
  readonly complete: (input: ServiceCallInput, decision: ServiceCallDecision) => Effect.Effect<ServiceCallVerdict>
  readonly decide: (input: ServiceCallInput) => Effect.Effect<ServiceCallVerdict>
  /**
   * Calls the service's handler with the validated body: its JSON object (200), an upstream's answer
   * passed on, a 502, or a 503 from the upstream's guard. `requestId` is the request's log id.
   */
  readonly call: (call: ServiceCallAllowed, body: JsonObject, bodyText: string, requestId: string) => Effect.Effect<Answer>
}

export class ServiceCallGate extends Context.Tag("service-auth/ServiceCallGate")<ServiceCallGate, ServiceCallGateShape>() {
  static readonly layer = Layer.effect(
    ServiceCallGate,
    Effect.gen(function*() {
      const lookup = yield* CatalogueLookup
      const tokens = yield* TokenService
      const handlers = yield* ServiceHandlers
      const upstreams = yield* UpstreamGateway
      const { noteCall } = yield* CallUse
      const verifyProof = makeProofVerifier(yield* SeenJtis)
      const { issuer } = yield* AppConfig
      const { admit } = yield* RateLimits
      const traced = yield* tracerEnabled
      const services: ServiceCallServices = {
        verifyAt: tokens.verifyAt,
        isUnknownKey: tokens.isUnknownKey,
        isForService: tokens.isForService,
        serviceRoute: lookup.serviceRoute,
        noteCall,
        admit
      }

      const complete = (input: ServiceCallInput, first: ServiceCallDecision) =>
        Effect.gen(function*() {
          let decision = first
          if (decision._tag === "NeedsKey") {
            yield* tokens.learnKeyOf(decision.token)
            // Decided again with the keys as they are now; a kid still unknown is refused as such.
            decision = decideServiceCall(input, { ...services, isUnknownKey: () => false })
          }
          if (decision._tag === "NeedsRoute") {
            const { address, clientId } = decision
            if (traced) yield* Effect.annotateCurrentSpan(spanAttributes(address, clientId))
            const route = yield* lookup.findServiceRoute(address, clientId)
            decision = decideServiceCall(input, { ...services, isUnknownKey: () => false, serviceRoute: () => route })
          }
          if (decision._tag === "NeedsKey" || decision._tag === "NeedsRoute") {
            return yield* Effect.dieMessage("the service-call decision needed storage twice")
          }
          if (decision._tag === "Prove") {
            const { address } = decision.call
            const url = `${issuer}/service/${address.profile}/${address.environment}/json/${address.uuid}`
            const proof = yield* verifyProof(decision.proof, { method: "POST", url, nowMillis: input.nowMillis, accessToken: decision.token })
            if ("refused" in proof) return { _tag: "Answer" as const, answer: dpopRefusal("invalid_dpop_proof", proof.refused) }
            if (proof.jkt !== decision.jkt) return { _tag: "Answer" as const, answer: wrongProofKey }
            decision = admitCall(services, input, decision.call)
          }
          if (traced && decision._tag === "Call") {
            yield* Effect.annotateCurrentSpan(spanAttributes(decision.address, decision.clientId))
          }
          return decision
        }).pipe(
          Effect.catchTag("StorageUnavailable", (error) => Effect.succeed({ _tag: "Answer" as const, answer: errorAnswer(error) }))
        )

      const decide = (input: ServiceCallInput) =>
        Effect.suspend(() => {
          if (!traced) return complete(input, decideServiceCall(input, services))
          const route = watchedCacheRead("CredentialRepoCache.findServiceRoute", services.serviceRoute)
          const decision = decideServiceCall(input, { ...services, serviceRoute: route.read })
          return Effect.zipRight(route.hit, complete(input, decision))
        })

      /** A stored proxy: the upstream's answer, in a client span continuing the trace when traces are exported. */
      const proxy = (allowed: ServiceCallAllowed, handler: ProxyHandler, bodyText: string, requestId: string) => {
        const calling = (traceparent: string | undefined) =>
          Effect.promise((signal) =>
            upstreams.call({
              address: allowed.address,
              handler,
              clientId: allowed.caller,
              approved: allowed.route.upstreamApproved,
              profileOrigins: allowed.route.upstreamOrigins,
              bodyText,
              requestId,
              whenCallerGone: whenAborted(signal),
              ...(traceparent === undefined ? {} : { traceparent })
            })
          )
        if (!traced) return Effect.map(calling(undefined), (called) => called.answer)
        return Effect.useSpan(
          UPSTREAM_SPAN,
          upstreamSpanOptions(upstreamAttributes(handler.url)),
          (span) =>
            Effect.map(calling(traceparentOf(span)), (called) => {
              if (called.status !== undefined) span.attribute("http.response.status_code", called.status)
              return called.answer
            })
        )
      }

      const call = (allowed: ServiceCallAllowed, body: JsonObject, bodyText: string, requestId: string): Effect.Effect<Answer> => {
        const stored = allowed.route.handler
        const calling: Effect.Effect<Answer> = stored.type === "proxy" && !handlers.isRegistered(allowed.address)
          ? proxy(allowed, stored, bodyText, requestId)
          : Effect.suspend(() =>
            handlers.resolve(allowed.address)({
              address: allowed.address,
              clientId: allowed.caller,
              body,
              bodyText
            })
          ).pipe(
            Effect.map((answer): Answer => ({ status: 200, headers: SERVICE_ANSWER_HEADERS, body: answer })),
            Effect.catchAll((error) => Effect.succeed(errorAnswer(error)))
          )
        return calling.pipe(
          // The stored handler type: a handler registered in code for this service runs in its place.
          (handling) =>
            traced ? Effect.zipRight(Effect.annotateCurrentSpan(handlerAttributes(stored.type)), handling) : handling,
          // A handler registered in code that throws has failed, like one that fails: 502, not 500.
          Effect.catchAllDefect((defect) =>
            Effect.as(
              Effect.logError(`Service handler failed: ${describeDefect(Cause.die(defect))}`),
              errorAnswer(new BadGateway({ description: "The service's handler failed" }))
            )
          )
        )
      }
      return ServiceCallGate.of({ services, complete, decide, call })
    })
  )
}
