/**
 * What a hosted service computes. A service's stored `handler` is `echo` (the default) or
 * `proxy`; an embedding program can also register its own handler for a service uuid in code,
 * which takes precedence over the stored one:
 *
 *   ServiceHandlers.layerWith({ "0b5e…": (call) => Effect.succeed({ total: 42 }) })
 */
import { Context, Effect, FiberRef, Layer, type Tracer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { BadGateway } from "../domain/Errors.js"
import type { ServiceHandlerConfig } from "../domain/Models.js"
import type { ServiceAddress } from "../storage/CredentialRepo.js"

export type JsonObject = { readonly [key: string]: unknown }

export interface ServiceCall {
  readonly address: ServiceAddress
  /** The client id of the verified token; null for a service without OAuth. */
  readonly clientId: string | null
  readonly body: JsonObject
}

export type ServiceHandler = (call: ServiceCall) => Effect.Effect<JsonObject, BadGateway>

export interface ServiceHandlersShape {
  /** The handler for this service: a registered one, else the one its configuration names. */
  readonly resolve: (address: ServiceAddress, config: ServiceHandlerConfig) => ServiceHandler
}

const isJsonObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const echo: ServiceHandler = (call) =>
  Effect.succeed({
    service_uuid: call.address.uuid,
    profile: call.address.profile,
    environment: call.address.environment,
    client_id: call.clientId,
    body: call.body
  })

/** Where a proxy's upstream is, for its span: host and port only (the path or query may hold credentials). */
const upstreamAttributes = (url: string): Record<string, unknown> => {
  try {
    const parsed = new URL(url)
    return {
      "server.address": parsed.hostname,
      "server.port": Number(parsed.port) || (parsed.protocol === "https:" ? 443 : 80)
    }
  } catch {
    return {}
  }
}

/**
 * The `traceparent` (W3C) of the current span, so that the upstream continues the trace. None while
 * traces are not exported: the upstream gets exactly the headers it always got.
 */
const traceHeaders = (span: Tracer.Span): Effect.Effect<Record<string, string>> =>
  Effect.map(FiberRef.get(FiberRef.currentTracerEnabled), (enabled): Record<string, string> =>
    enabled ? { traceparent: `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}` } : {})

/** POSTs the body to `url` and answers its JSON object; anything else is a 502. */
export const proxy = (url: string, timeoutMs: number): ServiceHandler => (call) =>
  Effect.useSpan(
    "ServiceHandlers.proxy",
    { kind: "client", captureStackTrace: false, attributes: { "http.request.method": "POST", ...upstreamAttributes(url) } },
    (span) =>
      Effect.flatMap(traceHeaders(span), (tracing) =>
        Effect.tryPromise({
          try: async (signal) => {
            const response = await fetch(url, {
              method: "POST",
              headers: { "content-type": "application/json", accept: "application/json", ...tracing },
              body: JSON.stringify(call.body),
              redirect: "manual",
              signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)])
            })
            span.attribute("http.response.status_code", response.status)
            const text = await response.text()
            if (!response.ok) throw new Error(`upstream answered ${response.status}`)
            const json: unknown = JSON.parse(text)
            if (!isJsonObject(json)) throw new Error("upstream did not answer a JSON object")
            return json
          },
          catch: (cause) =>
            new BadGateway({
              description: cause instanceof Error && cause.name === "TimeoutError"
                ? `The upstream service did not answer within ${timeoutMs} ms`
                : "The upstream service is unreachable or did not answer a JSON object"
            })
        }))
  )

export class ServiceHandlers extends Context.Tag("service-auth/ServiceHandlers")<ServiceHandlers, ServiceHandlersShape>() {
  /** Handlers registered in code, by service uuid, over the stored echo/proxy configuration. */
  static readonly layerWith = (registered: Readonly<Record<string, ServiceHandler>>) =>
    Layer.effect(
      ServiceHandlers,
      Effect.map(AppConfig, (config) =>
        ServiceHandlers.of({
          resolve: (address, stored) =>
            registered[address.uuid] ??
              (stored.type === "proxy" ? proxy(stored.url, config.upstreamTimeoutMs) : echo)
        }))
    )

  static readonly layer = ServiceHandlers.layerWith({})
}
