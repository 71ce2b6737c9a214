/**
 * `POST /oauth/token`, executed once for both entries (the fast lane and the HttpApi handler, which
 * only read the request and write the answer this returns): the server span, the decision
 * (`decideToken`) and what completes it in Effect (`ClientCredentialsGrant.complete`), the
 * signature, the answer and its headers, the metrics (the result and the duration) and the debug
 * line. A decision that needs nothing but memory is carried to its answer synchronously, a
 * signature aside (on the thread pool).
 */
import { Effect, Either, Option } from "effect"
import type { IncomingMessage } from "node:http"
import { authorizationHeader } from "../domain/AuthorizationHeader.js"
import { ClientCredentialsGrant, decideToken, type TokenInput, type TokenOutcome } from "./ClientCredentialsGrant.js"
import { dpopHeader } from "./DPoPProof.js"
import { NO_STORE, tokenAnswer } from "./TokenForm.js"
import { SIGNATURE_ATTRIBUTES, TokenService } from "./TokenService.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { type InvalidRequest, type PayloadTooLarge, wireOf } from "../domain/Errors.js"
import { spanAttributes } from "../domain/ServiceAddress.js"
import { LastUse } from "../catalogue/LastUse.js"
import { recordTokenRequest, tokenResultOf } from "../observability/ServiceMetrics.js"
import { tracerEnabled } from "../observability/Tracing.js"
import { clientAddress } from "../server/ClientAddress.js"
import type { ExecutionKit } from "../server/ExecutionKit.js"
import { annotateRequest, laneRequestSpan } from "../observability/LaneTrace.js"
import { TOKEN_ROUTE } from "../server/RequestMetrics.js"

/** What an entry read of a token request besides its headers. */
export interface TokenRequest {
  readonly request: IncomingMessage
  /** The body when it is a form, read within the size limit, or why it could not be; undefined for any other body. */
  readonly form: Either.Either<string, PayloadTooLarge | InvalidRequest> | undefined
  readonly nowMillis: number
  /** `process.hrtime.bigint()` when the request arrived. */
  readonly started: bigint
}

/**
 * Answers the request through `answered`, once, which says whether the answer reached the caller (a
 * caller that left is not recorded); `failed` when it cannot be answered (a defect).
 */
export type TokenExecutionShape = (
  request: TokenRequest,
  answered: (answer: Answer) => boolean,
  failed: (defect: unknown) => void
) => void

export const makeTokenExecution = (kit: ExecutionKit) =>
  Effect.gen(function*() {
    const grants = yield* ClientCredentialsGrant
    const tokens = yield* TokenService
    // `last_used_at` recorded synchronously (a catalogue spread over many credentials makes most token
    // requests some credential's first in a minute); where traces are exported, in Effect, in its span.
    const { recordUseSync } = yield* LastUse
    const recordsInSpan = yield* tracerEnabled
    const { tracer, run, below, cacheSpanned, record } = kit

    const execute: TokenExecutionShape = ({ request, form, nowMillis, started }, answered, failed) => {
      const span = laneRequestSpan(tracer, request, TOKEN_ROUTE, "/oauth/token", started)
      const done = (answer: Answer, result: Parameters<typeof recordTokenRequest>[0]) => {
        if (!answered(answer)) return
        recordTokenRequest(result)
        record(request, TOKEN_ROUTE, started, answer, span)
      }
      if (form !== undefined && Either.isLeft(form)) {
        return done(errorAnswer(form.left, NO_STORE), tokenResultOf(wireOf(form.left).body.error))
      }
      const input: TokenInput = {
        authorization: authorizationHeader(request),
        dpop: dpopHeader(request.headers["dpop"]),
        form: form?.right,
        remoteAddress: clientAddress(request),
        nowMillis
      }
      const decision = decideToken(
        input,
        span === undefined || !span.sampled ? grants.services : {
          ...grants.services,
          tokenTarget: cacheSpanned(span, "CredentialRepoCache.findTokenTarget", grants.services.tokenTarget)
        }
      )
      if (decision._tag === "Answer") return done(decision.answer, decision.result)

      /** The token signed (on the thread pool); the request's span records the algorithm. */
      const sign = (outcome: Extract<TokenOutcome, { readonly _tag: "Sign" }>) => {
        annotateRequest(span, SIGNATURE_ATTRIBUTES)
        tokens.issueAt(outcome.clientId, outcome.address, nowMillis, outcome.jkt).then((issued) => {
          done({ status: 200, headers: NO_STORE, body: tokenAnswer(issued) }, "issued")
        }).catch(failed)
      }
      if (
        decision._tag === "Issue" &&
        (!decision.recordUse || (!recordsInSpan && (recordUseSync(decision.clientId, new Date(nowMillis)), true)))
      ) {
        // All in memory: only the signature remains.
        annotateRequest(span, spanAttributes(decision.address, Option.some(decision.clientId)))
        return sign({ _tag: "Sign", clientId: decision.clientId, address: decision.address, jkt: undefined })
      }
      // What completes the decision in Effect records what it decides on the request's span.
      run(below(grants.complete(input, decision), span)).then((outcome) => {
        if (outcome._tag === "Sign") return sign(outcome)
        done(outcome.answer, outcome.result)
      }).catch(failed)
    }
    return execute
  })
