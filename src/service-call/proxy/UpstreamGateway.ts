/**
 * A proxy service's call of its upstream, from admission to the caller's answer: the one core both
 * entries use (the fast lane on node:http and the HttpApi handler, through `ServiceCallGate`).
 *
 * 0. The upstream policy (`UpstreamPolicy`): an upstream outside it answers 502 at once, never
 *    reaching the guard or the network; a guarded one (an owner's name) is connected to only where
 *    it resolves to public addresses (`Upstream.guardedLookup`). Neither refusal counts as the
 *    upstream's failure: the breaker is for upstreams that fail, not for addresses refused here.
 * 1. The guard (`UpstreamGuard`) admits the call or answers 503 (breaker open, or saturated).
 * 2. The upstream gets exactly: `Content-Type`, `Accept`, the identity headers (`X-Client-Id` for
 *    an OAuth service, `X-Service-Profile`, `X-Service-Environment`, `X-Service-Uuid`,
 *    `X-Request-Id`, `X-Service-Auth-Assertion`), the service's static headers and, while traces
 *    are exported, `traceparent`. Nothing else of the caller's request.
 * 3. Its answer becomes the caller's (`Upstream`), the guard learns how it went, and the outcome is
 *    counted (`service_auth_upstream_calls_total`).
 *
 * What a stored handler needs per call (its static headers in clear, its timeout) is worked out once
 * per handler object: the catalogue cache hands out the same object until the service changes.
 */
import { Context, Effect, Either, Layer, Runtime } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../../config/AppConfig.js"
import { ClientSecrets } from "../../catalogue/ClientSecrets.js"
import { KeyService } from "../../keys/KeyService.js"
import { BadGateway, UpstreamFailing } from "../../domain/Errors.js"
import type { StoredHandler } from "../../domain/Handlers.js"
import { upstreamStanding, type UpstreamVerdict } from "../../domain/UpstreamPolicy.js"
import { type Answer, errorAnswer, SERVICE_ANSWER_HEADERS } from "../../domain/Answer.js"
import { recordOpenBreakers, recordUpstreamCall } from "../../observability/ServiceMetrics.js"
import type { ServiceAddress } from "../../domain/ServiceAddress.js"
import { sweepPeriodically } from "../../domain/ExpiringEntries.js"
import { assertionIdOf, makeUpstreamAssertions } from "./UpstreamAssertion.js"
import { makeUpstreamGuard } from "./UpstreamGuard.js"
import { openHeaders } from "./UpstreamHeaders.js"
import { addressNotAllowed, makeUpstreamClient, type UpstreamAnswer, type WhenCallerGone } from "./Upstream.js"

export type ProxyHandler = Extract<StoredHandler, { readonly type: "proxy" }>

export interface UpstreamCall {
  readonly address: ServiceAddress
  readonly handler: ProxyHandler
  /** The verified caller's client id; null for a service without OAuth. */
  readonly clientId: string | null
  /** The body as the caller sent it (validated as a JSON object). */
  readonly bodyText: string
  /** The id the request's log line carries. */
  readonly requestId: string
  /** The W3C trace context the upstream continues, while traces are exported. */
  readonly traceparent?: string
  /** The caller's leaving, which aborts the exchange. */
  readonly whenCallerGone?: WhenCallerGone
  /** An admin token set the URL (`ServiceRoute.upstreamApproved`): not judged. Absent: judged. */
  readonly approved?: boolean | undefined
  /** The profile's `upstream_origins` (`ServiceRoute.upstreamOrigins`); absent: none. */
  readonly profileOrigins?: ReadonlyArray<string> | null | undefined
}

export interface UpstreamCalled {
  readonly answer: Answer
  /** The upstream's status, when it answered at all (for the span). */
  readonly status: number | undefined
}

export interface UpstreamGatewayShape {
  /** Never rejects. */
  readonly call: (call: UpstreamCall) => Promise<UpstreamCalled>
}

const FAILING_DESCRIPTION = "The upstream service is failing; retry later"
const unavailable = (retryAfterSeconds: number): UpstreamCalled => ({
  answer: errorAnswer(new UpstreamFailing({ description: FAILING_DESCRIPTION }), { "retry-after": String(retryAfterSeconds) }),
  status: undefined
})
const refusedAddress: UpstreamCalled = { answer: errorAnswer(addressNotAllowed), status: undefined }
const unreadableHeaders: UpstreamCalled = {
  answer: errorAnswer(new BadGateway({ description: "The service's static upstream headers cannot be read" })),
  status: undefined
}

/** What a stored proxy handler needs on every call, worked out once. */
interface PreparedHandler {
  /** The service it was prepared for: a handler object met under another address is prepared anew. */
  readonly address: ServiceAddress
  /** The service's key in the guard (`profile/environment/uuid`), one text for every call. */
  readonly guardKey: string
  readonly timeoutMs: number
  /** In clear; undefined when a sealed value cannot be opened. */
  readonly staticHeaders: Readonly<Record<string, string>> | undefined
  /** `assertionIdOf` per caller ("" for none), kept so that each call looks up the same text. */
  readonly assertionIds: Map<string, string>
  /** The upstream policy's verdict, for the approval and origins it was judged with. */
  standing?: { readonly approved: boolean; readonly origins: ReadonlyArray<string> | null; readonly verdict: UpstreamVerdict }
}

/** An admission the guard gave, to be settled once. */
type Admitted = { readonly trial: boolean }

/** Callers whose assertion ids a prepared handler keeps (a service has at most two credentials). */
const MAX_KEPT_ASSERTION_IDS = 16

const answerOf = (upstream: UpstreamAnswer): Answer => {
  const result = upstream.result
  switch (result._tag) {
    case "Ok":
      return { status: 200, headers: SERVICE_ANSWER_HEADERS, body: result.body }
    case "PassedOn":
      return {
        status: result.status,
        headers: result.retryAfter === undefined ? SERVICE_ANSWER_HEADERS : { ...SERVICE_ANSWER_HEADERS, "retry-after": result.retryAfter },
        body: result.body
      }
    case "Failed":
      return errorAnswer(result.error)
  }
}

export class UpstreamGateway extends Context.Tag("service-auth/UpstreamGateway")<UpstreamGateway, UpstreamGatewayShape>() {
  static readonly layer = Layer.scoped(
    UpstreamGateway,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      const clock = yield* Effect.clock
      /** Refusals are logged for the operator (the caller reads only that the address is not allowed), once a minute per reason. */
      const refusalsLogged = new Map<string, number>()
      const logRefusal = (reason: string) => {
        const now = clock.unsafeCurrentTimeMillis()
        const last = refusalsLogged.get(reason)
        if (last !== undefined && last > now - 60_000) return
        if (refusalsLogged.size >= 1_000) refusalsLogged.clear()
        refusalsLogged.set(reason, now)
        runFork(Effect.logWarning(`Proxy call refused by the upstream policy: ${reason}`))
      }
      // Its pools live as long as the server: closed with the layer's scope, at shutdown.
      const { postJson } = yield* Effect.acquireRelease(
        Effect.sync(() => makeUpstreamClient(logRefusal)),
        (client) => Effect.sync(client.close)
      )
      const keys = yield* KeyService
      const { headerSealingKey } = yield* ClientSecrets
      const guard = makeUpstreamGuard(config.upstreamMaxConcurrency, recordOpenBreakers)
      const assertions = makeUpstreamAssertions({ issuer: config.issuer, signingKeyAt: keys.signingKeyAt, randomId: randomUUID })
      yield* sweepPeriodically([assertions, guard])

      const prepared = new WeakMap<ProxyHandler, PreparedHandler>()
      const prepare = (address: ServiceAddress, handler: ProxyHandler): PreparedHandler => {
        let known = prepared.get(handler)
        if (
          known === undefined || known.address.uuid !== address.uuid || known.address.profile !== address.profile ||
          known.address.environment !== address.environment
        ) {
          const opened = handler.headers === undefined ? Either.right({}) : openHeaders(headerSealingKey, address.uuid, handler.headers)
          known = {
            address,
            guardKey: `${address.profile}/${address.environment}/${address.uuid}`,
            timeoutMs: handler.timeout_ms ?? config.upstreamTimeoutMs,
            staticHeaders: Either.getOrUndefined(opened),
            assertionIds: new Map()
          }
          prepared.set(handler, known)
        }
        return known
      }

      const assertionFor = (target: PreparedHandler, call: UpstreamCall, nowMillis: number) => {
        const subject = {
          profile: call.address.profile,
          environment: call.address.environment,
          uuid: call.address.uuid,
          clientId: call.clientId,
          audience: call.handler.url
        }
        const caller = call.clientId ?? ""
        let id = target.assertionIds.get(caller)
        if (id === undefined) {
          if (target.assertionIds.size >= MAX_KEPT_ASSERTION_IDS) target.assertionIds.clear()
          id = assertionIdOf(subject)
          target.assertionIds.set(caller, id)
        }
        return assertions.assertionAt(subject, nowMillis, id)
      }

      /** The exchange, once the assertion is in hand; settles the guard's admission whatever happens. */
      const exchange = (call: UpstreamCall, target: PreparedHandler, admission: Admitted, assertion: string): Promise<UpstreamCalled> => {
        const { address, handler } = call
        let sent: Promise<UpstreamAnswer>
        try {
          const headers: Record<string, string> = {
            ...target.staticHeaders,
            "content-type": "application/json",
            accept: "application/json",
            "x-service-profile": address.profile,
            "x-service-environment": address.environment,
            "x-service-uuid": address.uuid,
            "x-request-id": call.requestId,
            "x-service-auth-assertion": assertion
          }
          if (call.clientId !== null) headers["x-client-id"] = call.clientId
          if (call.traceparent !== undefined) headers["traceparent"] = call.traceparent
          sent = postJson(handler.url, call.bodyText, {
            timeoutMs: target.timeoutMs,
            headers,
            guarded: target.standing?.verdict._tag === "Guarded",
            ...(call.whenCallerGone === undefined ? {} : { whenCallerGone: call.whenCallerGone })
          })
        } catch {
          // Nothing here is expected to throw; if it did, the slot is still given back.
          return Promise.resolve(unsigned(target, admission))
        }
        return sent.then((upstream): UpstreamCalled => {
          const result = upstream.result
          guard.settle(target.guardKey, admission, result._tag === "Failed" && result.failing, clock.unsafeCurrentTimeMillis())
          recordUpstreamCall(
            result._tag === "Ok"
              ? "ok"
              : result._tag === "PassedOn"
              ? "passed_on"
              : result.error === addressNotAllowed
              ? "refused"
              : "bad_gateway"
          )
          return { answer: answerOf(upstream), status: upstream.status }
        })
      }

      /** Only signing can fail (the key is unusable): the call never left. The slot is given back. */
      const unsigned = (target: PreparedHandler, admission: Admitted): UpstreamCalled => {
        guard.settle(target.guardKey, admission, false, clock.unsafeCurrentTimeMillis())
        recordUpstreamCall("bad_gateway")
        return { answer: errorAnswer(new BadGateway({ description: "The gateway could not sign its assertion" })), status: undefined }
      }

      // Promises and callbacks rather than async/await: no turn of the microtask queue is spent
      // when the assertion is held, which it nearly always is (`postJson` never rejects).
      /** The verdict on this call's upstream, judged once per handler, approval and origins. */
      const standingOf = (target: PreparedHandler, call: UpstreamCall): UpstreamVerdict => {
        const approved = call.approved === true
        const origins = call.profileOrigins ?? null
        const known = target.standing
        if (known !== undefined && known.approved === approved && known.origins === origins) return known.verdict
        const verdict = upstreamStanding(call.handler.url, approved, { deployment: config.upstreamAllowedOrigins, profile: origins })
        target.standing = { approved, origins, verdict }
        return verdict
      }

      const call = (call: UpstreamCall): Promise<UpstreamCalled> => {
        const target = prepare(call.address, call.handler)
        const verdict = standingOf(target, call)
        if (verdict._tag === "Refused") {
          logRefusal(`${target.guardKey}: ${verdict.reason}`)
          recordUpstreamCall("refused")
          return Promise.resolve(refusedAddress)
        }
        if (target.staticHeaders === undefined) {
          recordUpstreamCall("bad_gateway")
          return Promise.resolve(unreadableHeaders)
        }
        const nowMillis = clock.unsafeCurrentTimeMillis()
        const admission = guard.admit(target.guardKey, nowMillis)
        if (admission._tag === "Refused") {
          recordUpstreamCall(admission.reason)
          return Promise.resolve(unavailable(admission.retryAfterSeconds))
        }
        let held: string | Promise<string>
        try {
          held = assertionFor(target, call, nowMillis)
        } catch {
          return Promise.resolve(unsigned(target, admission))
        }
        return typeof held === "string"
          ? exchange(call, target, admission, held)
          : held.then((assertion) => exchange(call, target, admission, assertion), () => unsigned(target, admission))
      }
      return UpstreamGateway.of({ call })
    })
  )
}
