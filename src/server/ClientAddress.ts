/**
 * The client address of a request: what both brute-force throttles count, what the audit trail
 * records as `source`, what request logs and spans show.
 *
 * It is the TCP peer, unless the peer is one of TRUSTED_PROXIES (addresses and CIDR ranges, IPv4
 * and IPv6). From a trusted peer it is the right-most address of `X-Forwarded-For` (or, when that
 * header is absent, of the `for=` parameters of `Forwarded`, RFC 7239) that is not itself trusted:
 * every proxy appends the address it received the request from, so the entries right of the first
 * untrusted one were written by our own proxies and that one by the last of them; anything left of
 * it is whatever the client chose to send. When every entry is trusted, the left-most is the client.
 * An entry that is not an IP address (`unknown`, an obfuscated RFC 7239 name, garbage) ends the walk
 * at the trusted hop that reported it. From any other peer, and with TRUSTED_PROXIES unset, the
 * headers are ignored.
 *
 * `NodeServer` works it out once per request (`resolveClientAddress`); everything else reads it
 * with `clientAddress(request)`, and the HttpApi side sees it as `request.remoteAddress`.
 */
import type { IncomingMessage } from "node:http"
import { BlockList, isIP, isIPv4 } from "node:net"

export interface TrustedProxies {
  readonly isTrusted: (address: string) => boolean
}

/** No proxy is trusted: the client address is always the TCP peer. */
export const NO_TRUSTED_PROXIES: TrustedProxies = { isTrusted: () => false }

/**
 * TRUSTED_PROXIES: comma-separated addresses and CIDR ranges (`10.0.0.0/8`, `fd00::/8`). Empty is
 * none. A message naming the first entry that is neither, for a start that stops with one line.
 */
export const parseTrustedProxies = (text: string): { readonly proxies: TrustedProxies } | { readonly error: string } => {
  const entries = text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  if (entries.length === 0) return { proxies: NO_TRUSTED_PROXIES }
  const list = new BlockList()
  for (const entry of entries) {
    const [address = "", prefix, ...rest] = entry.split("/")
    const family = isIP(address)
    const bits = prefix === undefined ? undefined : /^\d{1,3}$/.test(prefix) ? Number(prefix) : Number.NaN
    if (family === 0 || rest.length > 0 || (bits !== undefined && !(bits <= (family === 4 ? 32 : 128)))) {
      return {
        error: `TRUSTED_PROXIES must be a comma-separated list of IP addresses and CIDR ranges (e.g. 10.0.0.0/8,::1): "${
          entry.slice(0, 64)
        }" is neither`
      }
    }
    const type = family === 4 ? "ipv4" : "ipv6"
    if (bits === undefined) list.addAddress(address, type)
    else list.addSubnet(address, bits, type)
  }
  return {
    proxies: {
      // BlockList also matches an IPv4-mapped IPv6 peer (::ffff:10.0.0.1) against IPv4 entries.
      isTrusted: (address) => {
        const family = isIP(address)
        return family !== 0 && list.check(address, family === 4 ? "ipv4" : "ipv6")
      }
    }
  }
}

/**
 * An address as a forwarding header writes it, bare: quotes, `[...]` around IPv6 and a port
 * (`"[2001:db8::1]:4711"`, `192.0.2.43:47011`) removed. Undefined when it is not an IP address.
 */
export const forwardedAddress = (text: string): string | undefined => {
  let value = text.trim()
  if (value.startsWith("\"") && value.endsWith("\"") && value.length >= 2) value = value.slice(1, -1).trim()
  if (value.startsWith("[")) {
    const end = value.indexOf("]")
    if (end < 0) return undefined
    const rest = value.slice(end + 1)
    if (rest !== "" && !/^:\d{1,5}$/.test(rest)) return undefined
    value = value.slice(1, end)
  } else if (/^[\d.]+:\d{1,5}$/.test(value)) {
    value = value.slice(0, value.lastIndexOf(":"))
  }
  return isIP(value) === 0 ? undefined : value
}

/**
 * The `for=` value of each element of a Forwarded header, left to right (`""` for an element without
 * one). Split on every `,` and `;`, quotes or not: an address never holds either, and a client's
 * unbalanced quote must not swallow the element our proxy appends after it.
 */
const forwardedFor = (header: string): Array<string> =>
  header.split(",").map((element) => {
    const pair = element.split(";").map((p) => p.trim()).find((p) => /^for\s*=/i.test(p))
    return pair === undefined ? "" : pair.slice(pair.indexOf("=") + 1)
  })

const headerText = (value: string | Array<string> | undefined): string | undefined =>
  value === undefined ? undefined : Array.isArray(value) ? value.join(",") : value

/** The hops a trusted peer reports, left (the farthest) to right (the nearest), as written. */
const reportedHops = (request: IncomingMessage): Array<string> => {
  const xForwardedFor = headerText(request.headers["x-forwarded-for"])
  if (xForwardedFor !== undefined) return xForwardedFor.split(",")
  const forwarded = headerText(request.headers["forwarded"])
  return forwarded === undefined ? [] : forwardedFor(forwarded)
}

/** An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, a dual-stack socket's) as the IPv4 one it is. */
const unmapped = (address: string): string => {
  const match = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  return match !== null && isIPv4(match[1]!) ? match[1]! : address
}

/** The client address of `request` under `proxies` (the TCP peer's, "unknown" when it has gone). */
export const resolveClientAddress = (proxies: TrustedProxies, request: IncomingMessage): string => {
  const peer = request.socket.remoteAddress
  if (peer === undefined) return "unknown"
  if (!proxies.isTrusted(peer)) return peer
  let client = unmapped(peer)
  const hops = reportedHops(request)
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = forwardedAddress(hops[i]!)
    if (hop === undefined) return client
    client = unmapped(hop)
    if (!proxies.isTrusted(client)) return client
  }
  return client
}

const resolved = new WeakMap<IncomingMessage, string>()

/** Records the client address `NodeServer` worked out for this request. */
export const rememberClientAddress = (request: IncomingMessage, address: string): void => {
  resolved.set(request, address)
}

/** The client address of a request: the one `NodeServer` worked out, else the TCP peer. */
export const clientAddress = (request: IncomingMessage): string => resolved.get(request) ?? request.socket.remoteAddress ?? "unknown"
