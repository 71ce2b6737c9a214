/**
 * Whether an address is internal to the deployment's network: loopback, private, shared, link-local
 * (where cloud metadata services answer), multicast, reserved, or an IPv6 form that carries such an
 * IPv4 address (IPv4-mapped, NAT64, 6to4). An owner's proxy may not reach one unless an admin allows
 * its origin (`UpstreamPolicy`). Pure: the text of a URL's host after WHATWG parsing (which already
 * turns `2130706433`, `0x7f.1`, `0177.0.0.1` and `127.1` into `127.0.0.1`), or an address a name
 * resolved to.
 */

/** IPv4 ranges: base address, prefix length, what an address there is. */
const IPV4_RANGES: ReadonlyArray<readonly [string, number, string]> = [
  ["0.0.0.0", 8, "a \"this network\" address"],
  ["10.0.0.0", 8, "a private address"],
  ["100.64.0.0", 10, "a shared (carrier-grade NAT) address"],
  ["127.0.0.0", 8, "a loopback address"],
  ["169.254.0.0", 16, "a link-local address (where cloud metadata services answer)"],
  ["172.16.0.0", 12, "a private address"],
  ["192.0.0.0", 24, "an IETF protocol address"],
  ["192.168.0.0", 16, "a private address"],
  ["198.18.0.0", 15, "a benchmarking address"],
  ["224.0.0.0", 4, "a multicast address"],
  ["240.0.0.0", 4, "a reserved address"]
]

/** A dotted-decimal IPv4 address as a 32-bit number; undefined for anything else. */
const ipv4Number = (text: string): number | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  let value = 0
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined
    value = value * 256 + Number(part)
  }
  return value
}

const V4_RANGES = IPV4_RANGES.map(([base, bits, kind]) => ({ base: ipv4Number(base)!, bits, kind }))

const ipv4Text = (value: number) => [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join(".")

const ipv4Kind = (value: number): string | undefined => {
  for (const { base, bits, kind } of V4_RANGES) {
    const size = 2 ** (32 - bits)
    if (value >= base && value < base + size) return kind
  }
  return undefined
}

/** An IPv6 address (no brackets, no zone) as its eight 16-bit groups; undefined for anything else. */
const ipv6Groups = (text: string): ReadonlyArray<number> | undefined => {
  if (!/^[0-9a-f:.]+$/i.test(text) || !text.includes(":")) return undefined
  let tail: Array<number> = []
  let body = text
  // An IPv4 address in the last 32 bits (`::ffff:127.0.0.1`).
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted !== null) {
    const v4 = ipv4Number(dotted[2]!)
    if (v4 === undefined) return undefined
    tail = [v4 >>> 16, v4 & 0xffff]
    body = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1)
  }
  const halves = body.split("::")
  if (halves.length > 2) return undefined
  const groupsOf = (part: string) => (part === "" ? [] : part.split(":"))
  const head = groupsOf(halves[0]!)
  const rest = halves.length === 2 ? groupsOf(halves[1]!) : []
  if ([...head, ...rest].some((group) => !/^[0-9a-f]{1,4}$/i.test(group))) return undefined
  const known = head.length + rest.length + tail.length
  if (halves.length === 1 ? known !== 8 : known > 7) return undefined
  const zeros = new Array<number>(8 - known).fill(0)
  return [...head.map((g) => parseInt(g, 16)), ...zeros, ...rest.map((g) => parseInt(g, 16)), ...tail]
}

/** What an IPv6 address carrying an IPv4 one is, when that one is internal. */
const carried = (how: string, groups: ReadonlyArray<number>, at: number): string | undefined => {
  const v4 = (groups[at]! * 65536 + groups[at + 1]!) >>> 0
  const kind = ipv4Kind(v4)
  return kind === undefined ? undefined : `${how} of ${ipv4Text(v4)}, ${kind}`
}

const ipv6Kind = (groups: ReadonlyArray<number>): string | undefined => {
  const [g0, g1, g2, g3, g4, g5, , g7] = groups as [number, number, number, number, number, number, number, number]
  const zeroUpTo = (n: number) => groups.slice(0, n).every((g) => g === 0)
  if (zeroUpTo(7) && g7 === 0) return "the unspecified address"
  if (zeroUpTo(7) && g7 === 1) return "a loopback address"
  // ::a.b.c.d, deprecated IPv4-compatible addresses: never a public upstream.
  if (zeroUpTo(6)) return "an IPv4-compatible address (deprecated)"
  if (zeroUpTo(5) && g5 === 0xffff) return carried("an IPv4-mapped form", groups, 6)
  if (zeroUpTo(4) && g4 === 0xffff && g5 === 0) return carried("an IPv4-translated form", groups, 6)
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return carried("a NAT64 form", groups, 6)
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return "a local-use NAT64 address"
  if (g0 === 0x2002) return carried("a 6to4 form", groups, 1)
  if ((g0 & 0xfe00) === 0xfc00) return "a unique local (private) address"
  if ((g0 & 0xffc0) === 0xfe80) return "a link-local address"
  if ((g0 & 0xffc0) === 0xfec0) return "a site-local address (deprecated)"
  if ((g0 & 0xff00) === 0xff00) return "a multicast address"
  return undefined
}

/**
 * What kind of internal address `address` is (`"a loopback address"`, `"an IPv4-mapped form of
 * 127.0.0.1, a loopback address"`...), or undefined when it is public or not an address at all.
 * `address` is an IPv4 address in dotted decimal or an IPv6 address, with or without brackets or a
 * zone (`fe80::1%eth0`).
 */
export const internalAddressKind = (address: string): string | undefined => {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  const v4 = ipv4Number(bare)
  if (v4 !== undefined) return ipv4Kind(v4)
  const groups = ipv6Groups(bare.replace(/%.*$/, ""))
  return groups === undefined ? undefined : ipv6Kind(groups)
}

/** Whether `host` is an IP address (IPv4 dotted decimal, or IPv6 with or without brackets). */
export const isAddressLiteral = (host: string): boolean => {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
  return ipv4Number(bare) !== undefined || ipv6Groups(bare.replace(/%.*$/, "")) !== undefined
}

/**
 * What kind of internal host a URL's `hostname` (after WHATWG parsing) names: an internal address,
 * or `localhost` and its subdomains (with or without a trailing dot), which resolve to this machine
 * without asking DNS (RFC 6761). Undefined for other names: those are checked where they resolve,
 * when the connection is made.
 */
export const internalHostKind = (hostname: string): string | undefined => {
  const name = hostname.toLowerCase().replace(/\.$/, "")
  if (name === "localhost" || name.endsWith(".localhost")) return "a name of this machine (localhost)"
  return internalAddressKind(hostname)
}
