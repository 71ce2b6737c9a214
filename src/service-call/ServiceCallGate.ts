/**
 * `ServiceCallGate`: the service call's decision (`ServiceCallDecision`) completed in Effect where it
 * needs more than memory: it learns an unknown signing key, reads the route the catalogue cache did
 * not hold, and checks a DPoP proof. The call's one execution (`ServiceCallExecution`) decides with
 * its services and hands it what remains.
 */
import { Context, Effect, Layer } from "effect"
import { CallLastUse } from "../catalogue/CallLastUse.js"
import { TokenService } from "../token/TokenService.js"
import { errorAnswer } from "../domain/Answer.js"
import { CatalogueLookup } from "../catalogue/CatalogueLookup.js"
import { servicePath, spanAttributes } from "../domain/ServiceAddress.js"
import { tracerEnabled } from "../observability/Tracing.js"
import { AppConfig } from "../config/AppConfig.js"
import { makeProofVerifier } from "../token/DPoPProof.js"
import { SeenJtis } from "../token/SeenJtis.js"
import { dpopRefusal, wrongProofKey } from "./DPoPBinding.js"
import { RateLimits } from "./RateLimits.js"
import {
  admitCall,
  decideServiceCall,
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
}

export class ServiceCallGate extends Context.Tag("service-auth/ServiceCallGate")<ServiceCallGate, ServiceCallGateShape>() {
  static readonly layer = Layer.effect(
    ServiceCallGate,
    Effect.gen(function*() {
      const lookup = yield* CatalogueLookup
      const tokens = yield* TokenService
      const { recordCallUse } = yield* CallLastUse
      const verifyProof = makeProofVerifier(yield* SeenJtis)
      const { issuer } = yield* AppConfig
      const { admit } = yield* RateLimits
      const traced = yield* tracerEnabled
      const services: ServiceCallServices = {
        verifyAt: tokens.verifyAt,
        isUnknownKey: tokens.isUnknownKey,
        isForService: tokens.isForService,
        serviceRoute: lookup.serviceRoute,
        recordCallUse,
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
            const url = `${issuer}${servicePath(address)}`
            const proof = yield* verifyProof(decision.proof, {
              method: "POST",
              url,
              nowMillis: input.nowMillis,
              accessToken: decision.token
            })
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

      return ServiceCallGate.of({ services, complete })
    })
  )
}
