/**
 * The hot endpoints' executions (`POST /oauth/token`: `TokenExecution`; the service call:
 * `ServiceCallExecution`), one each, which both entries call: the fast lane (`FastLane`, on
 * node:http) and the HttpApi handlers (`TokenHttp`, `ServiceHttp`). An entry reads the request and
 * writes the answer it is given; everything between, and the request's record (metrics, spans, the
 * debug line), is the execution's.
 *
 * The app's middlewares record every other request; for one of these they leave the record to the
 * execution (`AnsweredByExecution`, set by the HttpApi handler), and record only an answer the
 * execution did not make (a defect's 500).
 */
import { Context, Effect, Layer } from "effect"
import { makeExecutionKit } from "./ExecutionKit.js"
import { makeServiceCallExecution, type ServiceCallExecutionShape } from "../service-call/ServiceCallExecution.js"
import { makeTokenExecution, type TokenExecutionShape } from "../token/TokenExecution.js"

export interface HotEndpointsShape {
  readonly token: TokenExecutionShape
  readonly serviceCall: ServiceCallExecutionShape
}

export class HotEndpoints extends Context.Tag("service-auth/HotEndpoints")<HotEndpoints, HotEndpointsShape>() {
  static readonly layer = Layer.effect(
    HotEndpoints,
    Effect.gen(function*() {
      const kit = yield* makeExecutionKit
      return HotEndpoints.of({
        token: yield* makeTokenExecution(kit),
        serviceCall: yield* makeServiceCallExecution(kit)
      })
    })
  )
}
