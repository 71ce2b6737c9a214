/**
 * What a hosted service computes. A service's stored `handler` is `echo` (the default) or
 * `proxy` (called by `UpstreamGateway`); an embedding program can also register its own handler for
 * a service in code, which takes precedence over the stored one. A handler belongs to one service's
 * full address, `profile/environment/uuid`: a uuid alone would hand it to any owner who creates a
 * service with that uuid in a profile of their own.
 *
 *   ServiceHandlers.layerWith({ "acme/production/0b5e…": (call) => Effect.succeed({ total: 42 }) })
 */
import { Context, Effect, Layer, type Tracer } from "effect"
import type { BadGateway } from "../domain/Errors.js"
import { canonicalServiceUuid } from "../domain/Identifiers.js"
import { type ServiceAddress, serviceAddress } from "../domain/ServiceAddress.js"
import type { JsonObject } from "./proxy/Upstream.js"

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

/** A registered handler with the service it belongs to. */
interface Registration {
  readonly address: ServiceAddress
  readonly handler: ServiceHandler
}

/**
 * The registrations by uuid (so that the lookup of an unregistered service, nearly every call, is one
 * Map miss), or the keys that are not a service's full address. A bare uuid, the form handlers were
 * once keyed by, is named as such: an embedding program that kept it must not lose its handler, or
 * the protection, without a word.
 */
const registrationsOf = (
  registered: Readonly<Record<string, ServiceHandler>>
): { readonly byUuid: ReadonlyMap<string, ReadonlyArray<Registration>> } | { readonly problems: ReadonlyArray<string> } => {
  const byUuid = new Map<string, Array<Registration>>()
  const problems: Array<string> = []
  const seen = new Set<string>()
  for (const [key, handler] of Object.entries(registered)) {
    const parts = key.split("/")
    const address = parts.length === 3 ? serviceAddress(parts[0]!, parts[1]!, parts[2]!) : undefined
    if (address === undefined) {
      problems.push(
        canonicalServiceUuid(key) !== undefined
          ? `"${key}" is a bare service uuid; write "profile/environment/${key}"`
          : `"${key}" is not a service address "profile/environment/uuid"`
      )
      continue
    }
    const canonical = `${address.profile}/${address.environment}/${address.uuid}`
    if (seen.has(canonical)) {
      problems.push(`"${key}" names the service ${canonical} a second time`)
      continue
    }
    seen.add(canonical)
    const atUuid = byUuid.get(address.uuid)
    if (atUuid === undefined) byUuid.set(address.uuid, [{ address, handler }])
    else atUuid.push({ address, handler })
  }
  return problems.length > 0 ? { problems } : { byUuid }
}

export class ServiceHandlers extends Context.Tag("service-auth/ServiceHandlers")<ServiceHandlers, ServiceHandlersShape>() {
  /**
   * Handlers registered in code, each keyed by its service's full address `profile/environment/uuid`
   * (the uuid in any casing), over the stored echo/proxy configuration. A key that is not such an
   * address makes the layer fail to build, with a defect naming every such key.
   */
  static readonly layerWith = (registered: Readonly<Record<string, ServiceHandler>>) =>
    Layer.effect(
      ServiceHandlers,
      Effect.suspend(() => {
        const checked = registrationsOf(registered)
        if ("problems" in checked) {
          return Effect.dieMessage(
            `ServiceHandlers.layerWith: a handler is keyed by its service's full address "profile/environment/uuid": ${
              checked.problems.join("; ")
            }`
          )
        }
        const registrationOf = (address: ServiceAddress): Registration | undefined => {
          const atUuid = checked.byUuid.get(address.uuid)
          return atUuid?.find((known) => known.address.profile === address.profile && known.address.environment === address.environment)
        }
        return Effect.succeed(ServiceHandlers.of({
          resolve: (address) => registrationOf(address)?.handler ?? echo,
          isRegistered: (address) => registrationOf(address) !== undefined
        }))
      })
    )

  static readonly layer = ServiceHandlers.layerWith({})
}
