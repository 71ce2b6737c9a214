/**
 * What a hosted service computes. A service's stored `handler` is `echo` (the default) or
 * `proxy` (called by `UpstreamGateway`); an embedding program can also register its own handler for
 * a service uuid in code, which takes precedence over the stored one:
 *
 *   ServiceHandlers.layerWith({ "0b5e…": (call) => Effect.succeed({ total: 42 }) })
 */
import { Context, Effect, Layer, type Tracer } from "effect"
import type { BadGateway } from "../domain/Errors.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import type { JsonObject } from "./Upstream.js"

export type { JsonObject }

export interface ServiceCall {
  readonly address: ServiceAddress
  /** The client id of the verified token; null for a service without OAuth. */
  readonly clientId: string | null
  readonly body: JsonObject
  /** The body's text as it was validated (what a proxy sends on); `JSON.stringify(body)` when absent. */
  readonly bodyText?: string
}

export type ServiceHandler = (call: ServiceCall) => Effect.Effect<JsonObject, BadGateway>

export interface ServiceHandlersShape {
  /** The handler registered in code for this service, else echo (a stored proxy is `UpstreamGateway`'s). */
  readonly resolve: (address: ServiceAddress) => ServiceHandler
  /** Whether a handler registered in code takes this service's place (the fast path then runs it in Effect). */
  readonly isRegistered: (address: ServiceAddress) => boolean
}

/** The echo handler's answer. */
export const echoOf = (call: ServiceCall): JsonObject => ({
  service_uuid: call.address.uuid,
  profile: call.address.profile,
  environment: call.address.environment,
  client_id: call.clientId,
  body: call.body
})

export const echo: ServiceHandler = (call) => Effect.succeed(echoOf(call))

/** Where a proxy's upstream is, for its span: host and port only (the path or query may hold credentials). */
export const upstreamAttributes = (url: string): Record<string, unknown> => {
  try {
    const parsed = new URL(url)
    return {
      "http.request.method": "POST",
      "server.address": parsed.hostname,
      "server.port": Number(parsed.port) || (parsed.protocol === "https:" ? 443 : 80)
    }
  } catch {
    return { "http.request.method": "POST" }
  }
}

/** The W3C `traceparent` that makes the upstream continue the trace at `span`. */
export const traceparentOf = (span: Pick<Tracer.Span, "traceId" | "spanId" | "sampled">): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

export class ServiceHandlers extends Context.Tag("service-auth/ServiceHandlers")<ServiceHandlers, ServiceHandlersShape>() {
  /** Handlers registered in code, by service uuid, over the stored echo/proxy configuration. */
  static readonly layerWith = (registered: Readonly<Record<string, ServiceHandler>>) =>
    Layer.succeed(
      ServiceHandlers,
      ServiceHandlers.of({
        resolve: (address) => registered[address.uuid] ?? echo,
        isRegistered: (address) => Object.hasOwn(registered, address.uuid)
      })
    )

  static readonly layer = ServiceHandlers.layerWith({})
}
