/**
 * How an HttpApi handler takes the answer one of the hot endpoints' executions (`HotEndpoints`) made
 * and recorded: `answerOfExecution` hands the execution its two callbacks and marks the request
 * (`answeredByExecution`), so the app's middlewares (`requestMetrics`, `requestLog`) record it no more.
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, FiberRef } from "effect"
import type { Answer } from "../domain/Answer.js"
import { toServerResponse } from "./WriteAnswer.js"

export const answeredByExecution = FiberRef.unsafeMake(false)

/**
 * The response an execution answers: `run` starts it with `deliver` (which tells the execution
 * whether the caller is still there to take the answer) and `fail` (a defect).
 */
export const answerOfExecution = (
  request: HttpServerRequest.HttpServerRequest,
  run: (deliver: (answer: Answer) => boolean, fail: (defect: unknown) => void) => void
) =>
  Effect.gen(function*() {
    const response = NodeHttpServerRequest.toServerResponse(request)
    const answer = yield* Effect.async<Answer>((resume) =>
      run(
        (answer) => {
          resume(Effect.succeed(answer))
          return !response.destroyed
        },
        (defect) => resume(Effect.die(defect))
      )
    )
    yield* FiberRef.set(answeredByExecution, true)
    return toServerResponse(answer)
  })
