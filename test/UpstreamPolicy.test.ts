/**
 * The upstream policy's pure parts (`InternalAddresses`, `UpstreamPolicy`): every internal address
 * form an owner might write in a proxy URL, read as WHATWG URL parsing leaves it, and the rule that
 * turns a URL and the operator's origins into a verdict.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { internalAddressKind, internalHostKind } from "../src/domain/InternalAddresses.js"
import { judgeUpstream, normalisedOrigins, parseAllowedOrigins, parseOrigin, upstreamStanding } from "../src/domain/UpstreamPolicy.js"

/** The host an owner's URL names, as the gateway sees it. */
const hostOf = (url: string) => new URL(url).hostname

describe("internal hosts, as a URL names them", () => {
  const loopbackForms = [
    "http://127.0.0.1:8080/x",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://0x7f.0.0.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://017700000001/",
    "http://127.000.000.001/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[0:0:0:0:0:ffff:7f00:0001]/",
    "http://[64:ff9b::127.0.0.1]/",
    "http://[2002:7f00:1::]/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://api.localhost./"
  ]
  for (const url of loopbackForms) {
    it(`${url} is internal`, () => {
      expect(internalHostKind(hostOf(url))).toBeDefined()
    })
  }

  it("names the kind, and the IPv4 address an IPv6 form carries", () => {
    expect(internalHostKind(hostOf("http://2130706433/"))).toBe("a loopback address")
    expect(internalHostKind(hostOf("http://[::ffff:7f00:1]/"))).toBe("an IPv4-mapped form of 127.0.0.1, a loopback address")
    expect(internalHostKind(hostOf("http://169.254.169.254/latest/meta-data/"))).toMatch(/link-local.*metadata/)
    expect(internalHostKind("localhost")).toBe("a name of this machine (localhost)")
  })

  const internal = [
    "0.0.0.0",
    "0.1.2.3",
    "10.0.0.1",
    "10.255.255.255",
    "100.64.0.1",
    "100.127.255.255",
    "127.255.255.254",
    "169.254.169.254",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.8",
    "192.168.1.1",
    "198.18.0.1",
    "198.19.255.255",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "fe80::1%eth0",
    "febf::1",
    "ff02::1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "2002:c0a8:0101::1",
    "::127.0.0.1",
    "[::1]",
    "fd00:ec2::254"
  ]
  for (const address of internal) {
    it(`${address} is internal`, () => expect(internalAddressKind(address)).toBeDefined())
  }

  const publicAddresses = [
    "8.8.8.8",
    "1.1.1.1",
    "100.63.255.255",
    "100.128.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.1",
    "192.169.0.1",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1"
  ]
  for (const address of publicAddresses) {
    it(`${address} is public`, () => expect(internalAddressKind(address)).toBeUndefined())
  }

  it("other names are left to the connection-time check; text that is no address is not one", () => {
    expect(internalHostKind("api.example.com")).toBeUndefined()
    expect(internalHostKind("localhost.example.com")).toBeUndefined()
    expect(internalAddressKind("api.example.com")).toBeUndefined()
    expect(internalAddressKind("1.2.3")).toBeUndefined()
    expect(internalAddressKind("1:2:3")).toBeUndefined()
    expect(internalAddressKind("1::2::3")).toBeUndefined()
  })
})

describe("origins an operator lists", () => {
  it("normalises an origin and refuses anything else", () => {
    expect(parseOrigin("https://API.example.com:443/")).toEqual(Either.right("https://api.example.com"))
    expect(parseOrigin("http://127.0.0.1:8080")).toEqual(Either.right("http://127.0.0.1:8080"))
    expect(parseOrigin("http://[::1]:9000")).toEqual(Either.right("http://[::1]:9000"))
    for (
      const bad of [
        "https://a.example.com/path",
        "ftp://a.example.com",
        "https://u:p@a.example.com",
        "a.example.com",
        "https://a.example.com?x",
        "https://a.example.com#x",
        "",
        "https://"
      ]
    ) {
      expect(Either.isLeft(parseOrigin(bad))).toBe(true)
    }
  })

  it("UPSTREAM_ALLOWED_ORIGINS: comma-separated, each once; a bad entry is named by its position", () => {
    expect(parseAllowedOrigins(" https://a.example.com , http://127.0.0.1:9/,https://a.example.com:443 ,")).toEqual(
      Either.right(["https://a.example.com", "http://127.0.0.1:9"])
    )
    expect(parseAllowedOrigins("")).toEqual(Either.right([]))
    expect(parseAllowedOrigins("https://a.example.com,https://b.example.com/x")).toEqual(
      Either.left(
        "UPSTREAM_ALLOWED_ORIGINS entry 2 of 2 must be an origin: scheme://host[:port], http or https, without a path, query or credentials"
      )
    )
  })

  it("a profile's list is stored normalised, each once; an empty list is none", () => {
    expect(normalisedOrigins(["https://A.example.com/", "https://a.example.com"])).toEqual(["https://a.example.com"])
    expect(normalisedOrigins([])).toBeNull()
    expect(normalisedOrigins(null)).toBeNull()
  })
})

describe("the verdict on an owner's proxy URL", () => {
  const none = { deployment: [] }
  it("without any list: internal hosts refused, names guarded, public addresses allowed", () => {
    expect(judgeUpstream("http://2130706433:8080/x", none)).toEqual({
      _tag: "Refused",
      reason: "127.0.0.1 is a loopback address, which an owner's service may not target unless an admin allows its origin"
    })
    expect(judgeUpstream("https://api.example.com/x", none)).toEqual({ _tag: "Guarded" })
    expect(judgeUpstream("http://8.8.8.8/x", none)._tag).toBe("Guarded")
  })

  it("an allowed origin is open, even an internal one: the operator decided", () => {
    expect(judgeUpstream("http://0x7f000001:8080/x", { deployment: ["http://127.0.0.1:8080"] })).toEqual({ _tag: "Open" })
    expect(judgeUpstream("http://localhost:9/x", { deployment: [], profile: ["http://localhost:9"] })).toEqual({ _tag: "Open" })
  })

  it("with a list, anything else is refused, public or not", () => {
    const verdict = judgeUpstream("https://other.example.com/x", { deployment: [], profile: ["https://api.example.com"] })
    expect(verdict).toEqual({
      _tag: "Refused",
      reason: "https://other.example.com is not among the origins this profile's services may target " +
        "(an admin allows origins with UPSTREAM_ALLOWED_ORIGINS or the profile's upstream_origins)"
    })
    expect(judgeUpstream("http://127.0.0.1:8081/x", { deployment: ["http://127.0.0.1:8080"] })._tag).toBe("Refused")
  })

  it("an admin's URL is open whatever it names", () => {
    expect(upstreamStanding("http://127.0.0.1:1/", true, none)).toEqual({ _tag: "Open" })
    expect(upstreamStanding("http://127.0.0.1:1/", false, none)._tag).toBe("Refused")
  })
})
