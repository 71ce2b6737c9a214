/**
 * The worst case in bytes of each bounded in-memory table (docs/performance.md): each is filled to
 * its bound with entries of the largest realistic shape (the longest names the API accepts, IPv6
 * addresses, RS256 tokens), and the V8 heap is measured before and after, with a full GC each time.
 *
 *   node --expose-gc --import tsx bench/bound-bytes.ts
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { makeAuthFailureLimiter, MAX_TRACKED } from "../src/token/AuthFailureLimiter.js"
import { MAX_TRACKED_CREDENTIALS } from "../src/catalogue/CallLastUse.js"
import { MAX_VERIFIED_TOKENS } from "../src/token/TokenService.js"
import { ExpiringEntries } from "../src/domain/ExpiringEntries.js"
import { NAME_MAX_LENGTH } from "../src/domain/Limits.js"
import { makeRateLimits, MAX_RATE_WINDOWS } from "../src/service-call/RateLimits.js"
import { MAX_ASSERTIONS } from "../src/service-call/proxy/UpstreamAssertion.js"
import { MAX_GUARDED_SERVICES, makeUpstreamGuard } from "../src/service-call/proxy/UpstreamGuard.js"
import { LocalIds, LOCAL_MAX, SOLE_WRITER_MAX } from "../src/token/SeenJtis.js"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with node --expose-gc")

const heapUsed = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex")
const clientId = () => `svc_${hex(16)}`
const uuid = () => {
  const h = hex(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}
const ipv6 = () => Array.from({ length: 8 }, () => randomBytes(2).toString("hex")).join(":")
const longName = (i: number) => `${"p".repeat(NAME_MAX_LENGTH - 8)}${String(i).padStart(8, "0")}`

const measure = (name: string, entries: number, fill: () => unknown) => {
  const before = heapUsed()
  const held = fill()
  const bytes = heapUsed() - before
  console.log(`| ${name} | ${entries.toLocaleString("en")} | ${Math.round(bytes / entries)} B | ${(bytes / 1e6).toFixed(1)} MB |`)
  return held
}

console.log("| table | entries at the bound | bytes an entry | at the bound |")
console.log("|---|---|---|---|")
const kept: Array<unknown> = []

kept.push(measure("verified tokens (TokenService)", MAX_VERIFIED_TOKENS, () => {
  const table = new ExpiringEntries<string, unknown>(MAX_VERIFIED_TOKENS)
  for (let i = 0; i < MAX_VERIFIED_TOKENS; i++) {
    const profile = longName(i)
    table.set(
      randomBytes(32).toString("base64url"),
      {
        kid: "key-2026-01",
        claims: {
          iss: "https://auth.example.com",
          sub: clientId(),
          client_id: clientId(),
          aud: `https://auth.example.com/service/${profile}/production/json/${uuid()}`,
          scope: "service:call",
          iat: 1_800_000_000,
          exp: 1_800_003_600,
          jti: uuid(),
          data: { profile, environment: "production", service_uuid: uuid() }
        }
      },
      Number.MAX_SAFE_INTEGER,
      0
    )
  }
  return table
}))

kept.push(measure("last call uses (CallLastUse)", MAX_TRACKED_CREDENTIALS, () => {
  const table = new ExpiringEntries<string, true>(MAX_TRACKED_CREDENTIALS)
  for (let i = 0; i < MAX_TRACKED_CREDENTIALS; i++) table.set(clientId(), true, Number.MAX_SAFE_INTEGER, 0)
  return table
}))

kept.push(measure("rate windows (RateLimits), longest names, IPv6 clients", MAX_RATE_WINDOWS, () => {
  const limits = makeRateLimits()
  const limit = { requests: 10, per_seconds: 3_600 }
  for (let i = 0; i < MAX_RATE_WINDOWS; i++) {
    limits.admit({ profile: longName(i), environment: longName(i), uuid: uuid() } as never, limit, ipv6(), 0)
  }
  return limits
}))

kept.push(measure("auth failure pairs (AuthFailureLimiter), IPv6, 128-char client ids", MAX_TRACKED, () => {
  const limiter = Effect.runSync(makeAuthFailureLimiter(5))
  for (let i = 0; i < MAX_TRACKED; i++) Effect.runSync(limiter.recordFailure(longName(i), ipv6()))
  return limiter
}))

kept.push(measure("seen jti ids, PostgreSQL-less memory (SeenJtis)", LOCAL_MAX, () => {
  const ids = new LocalIds(LOCAL_MAX, 0)
  for (let i = 0; i < LOCAL_MAX; i++) ids.add(randomBytes(32).toString("base64url"), Number.MAX_SAFE_INTEGER, 0)
  return ids
}))

kept.push(measure("seen jti ids, embedded database (SeenJtis)", SOLE_WRITER_MAX, () => {
  const ids = new LocalIds(SOLE_WRITER_MAX, 1000)
  for (let i = 0; i < SOLE_WRITER_MAX; i++) ids.add(randomBytes(32).toString("base64url"), Number.MAX_SAFE_INTEGER, 0)
  return ids
}))

kept.push(measure("held upstream assertions (UpstreamAssertion)", MAX_ASSERTIONS, () => {
  const table = new ExpiringEntries<string, unknown>(MAX_ASSERTIONS)
  for (let i = 0; i < MAX_ASSERTIONS; i++) {
    const id = `${longName(i)}/production/${uuid()}\u0000${clientId()}\u0000https://upstream.example.com/${hex(32)}`
    table.set(id, { token: randomBytes(880).toString("base64url"), kid: "key-2026-01", reuseUntil: 1 }, Number.MAX_SAFE_INTEGER, 0)
  }
  return table
}))

kept.push(measure("circuit states (UpstreamGuard)", MAX_GUARDED_SERVICES, () => {
  const guard = makeUpstreamGuard(64, () => {}, MAX_GUARDED_SERVICES)
  for (let i = 0; i < MAX_GUARDED_SERVICES; i++) {
    const key = `${longName(i)}/production/${uuid()}`
    const admission = guard.admit(key, 0)
    if (admission._tag === "Admitted") guard.settle(key, admission, true, 0)
  }
  return guard
}))
