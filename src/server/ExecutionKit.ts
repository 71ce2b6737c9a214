/**
 * What the two hot endpoints' executions (`TokenExecution`, `ServiceCallExecution`) share: the app's
 * runtime for work that needs Effect, the request's spans (`LaneTrace`), the server's request ids
 * (`RequestIds`), and `record`, which records an answered request once (its duration by route
 * template, its server span's end, the debug line), whichever entry parsed it.
 */
import { Effect, Option, Runtime, type Tracer } from "effect"
import type { IncomingMessage } from "node:http"
import { AppConfig } from "../config/AppConfig.js"
import type { Answer } from "../domain/Answer.js"
import { recordDuration } from "../observability/ServiceMetrics.js"
import { clientAddress } from "./ClientAddress.js"
import { cacheHitEvent, endRequestSpan, type LaneTracer } from "../observability/LaneTrace.js"
import { RequestIds } from "./RequestId.js"
import { requestLogLine } from "./RequestLog.js"

export const makeExecutionKit = Effect.gen(function*() {
  const config = yield* AppConfig
  // The app's runtime (its tracer, logger, log level): what needs Effect runs on it.
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runPromise(runtime)
  const tracer: LaneTracer = Option.isSome(config.tracing) ? yield* Effect.tracer : undefined
  const requestIdOf = yield* RequestIds
  const logged = yield* Effect.map(Effect.whenLogLevel(Effect.void, "Debug"), Option.isSome)

  /**
   * Work carried on in Effect, below the request's span, sampled or not (the tracer's head sampling:
   * what it records lands on the request's span, and a request not sampled records nothing).
   */
  const below = <A, E>(effect: Effect.Effect<A, E>, span: Tracer.Span | undefined) =>
    span === undefined ? effect : Effect.withParentSpan(effect, span)

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

  /** Records an answered request, once: its duration, its server span's end, its debug line. */
  const record = (
    request: IncomingMessage,
    route: string,
    started: bigint,
    answer: Answer,
    span: Tracer.Span | undefined
  ) => {
    const elapsedNs = process.hrtime.bigint() - started
    recordDuration(route, Number(elapsedNs) / 1e9)
    endRequestSpan(span, answer.status)
    if (logged) {
      Runtime.runFork(runtime)(
        requestLogLine(
          "POST",
          request.url ?? "",
          answer.status,
          Number(elapsedNs / 1_000_000n),
          clientAddress(request),
          requestIdOf(request)
        )
      )
    }
  }

  return { tracer, run, below, cacheSpanned, record, requestIdOf }
})

export type ExecutionKit = Effect.Effect.Success<typeof makeExecutionKit>
