/**
 * The profile editor's staged changes (src/web/admin/assets/editor-changes.js): a pure module the
 * page imports as it is, tested here without a browser.
 */
import { describe, expect, test } from "vitest"
import {
  canAdd,
  type Changes,
  changesFor,
  emptyChanges,
  isDirty,
  isRemovalStaged,
  MAX_CREDENTIALS,
  normalizeDoc,
  overLimit,
  type ProfileDoc,
  projectedCount,
  reconcile,
  saveRequest,
  type Service,
  headerLines,
  serviceUpdate,
  rateLimitFields,
  expiryMark,
  stageAdd,
  stageRemoval,
  summaryText,
  unstageAdd,
  unstageRemoval
} from "../src/web/admin/assets/editor-changes.js"

const UUID = "6f1c2b7e-0d3a-4a8e-9d53-1f0a2b3c4d5e"
const OTHER = "0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9"
const cred = (n: number) => ({ client_id: `svc_${String(n).repeat(32).slice(0, 32)}`, created_at: null, last_used_at: null })

const service = (credentials: number, uuid = UUID): Service => ({
  uuid,
  name: "Billing",
  auth_type: "oauth",
  handler: { type: "echo" },
  credentials: Array.from({ length: credentials }, (_, i) => cred(i + 1))
})

const doc = (services: Array<Service>, profile = "acme", env = "prod"): ProfileDoc => ({
  profile,
  created_at: null,
  environments: [{ name: env, services }]
})

/** Stages an addition that must be allowed. */
const add = (changes: Changes, s: Service, env = "prod") => {
  const next = stageAdd(changes, env, s)
  expect(next).not.toBeNull()
  return next!.changes
}

describe("staged credential changes", () => {
  test("start empty and clean, for a profile", () => {
    const changes = emptyChanges("acme")
    expect(changes).toEqual({ profile: "acme", adds: [], removes: [], nextKey: 1 })
    expect(isDirty(changes)).toBe(false)
    expect(emptyChanges().profile).toBeNull()
    expect(summaryText(changes)).toBe("No unsaved changes.")
    expect(saveRequest(changes)).toEqual({ changes: [] })
  })

  test("an addition is staged, counted toward the limit, and never mutates its input", () => {
    const s = service(0)
    const before = emptyChanges("acme")
    const staged = stageAdd(before, "prod", s)!
    expect(before.adds).toEqual([])
    expect(staged.add).toEqual({ key: "a1", environment: "prod", service_uuid: UUID })
    expect(isDirty(staged.changes)).toBe(true)
    expect(projectedCount(staged.changes, "prod", s)).toBe(1)
    // The same service in another environment is another service.
    expect(projectedCount(staged.changes, "test", s)).toBe(0)
    expect(changesFor(staged.changes, "prod", UUID).adds).toHaveLength(1)
    expect(changesFor(staged.changes, "prod", OTHER).adds).toHaveLength(0)
  })

  test(`the limit: at most ${MAX_CREDENTIALS} live credentials, staged additions included`, () => {
    expect(MAX_CREDENTIALS).toBe(2)
    let changes = emptyChanges("acme")
    const empty = service(0)
    changes = add(changes, empty)
    changes = add(changes, empty)
    expect(canAdd(changes, "prod", empty)).toBe(false)
    expect(stageAdd(changes, "prod", empty)).toBeNull()

    const one = service(1)
    const withOne = add(emptyChanges("acme"), one)
    expect(projectedCount(withOne, "prod", one)).toBe(2)
    expect(stageAdd(withOne, "prod", one)).toBeNull()

    const full = service(2)
    expect(canAdd(emptyChanges("acme"), "prod", full)).toBe(false)
  })

  test("a staged removal frees a place, for a rotation; undoing it takes the place back", () => {
    const full = service(2)
    const removed = stageRemoval(emptyChanges("acme"), "prod", full, cred(1).client_id)
    expect(isRemovalStaged(removed, "prod", UUID, cred(1).client_id)).toBe(true)
    expect(isRemovalStaged(removed, "prod", UUID, cred(2).client_id)).toBe(false)
    expect(projectedCount(removed, "prod", full)).toBe(1)
    const rotated = add(removed, full)
    expect(projectedCount(rotated, "prod", full)).toBe(2)
    expect(canAdd(rotated, "prod", full)).toBe(false)
    expect(summaryText(rotated)).toBe("2 unsaved changes: 1 new credential, 1 removal.")

    const undone = unstageRemoval(rotated, "prod", UUID, cred(1).client_id)
    expect(undone.removes).toEqual([])
    expect(projectedCount(undone, "prod", full)).toBe(3)
    expect(overLimit(undone, doc([full]))).toEqual([{ environment: "prod", service_uuid: UUID, count: 3 }])
  })

  test("a removal is staged once, and only for a live credential of the service", () => {
    const s = service(1)
    const once = stageRemoval(emptyChanges("acme"), "prod", s, cred(1).client_id)
    expect(stageRemoval(once, "prod", s, cred(1).client_id)).toBe(once)
    expect(once.removes).toHaveLength(1)
    const unknown = stageRemoval(emptyChanges("acme"), "prod", s, cred(9).client_id)
    expect(isDirty(unknown)).toBe(false)
  })

  test("undoing an addition removes that one only, by key; keys are never reused", () => {
    const s = service(0)
    const first = stageAdd(emptyChanges("acme"), "prod", s)!
    const second = stageAdd(first.changes, "prod", s)!
    expect(second.add.key).not.toBe(first.add.key)
    const left = unstageAdd(second.changes, first.add.key)
    expect(left.adds).toEqual([second.add])
    const again = stageAdd(left, "prod", s)!
    expect([first.add.key, second.add.key]).not.toContain(again.add.key)
    expect(summaryText(again.changes)).toBe("2 unsaved changes: 2 new credentials.")
  })

  test("save sends removals first, then additions, in the contract's shape", () => {
    const a = service(2)
    const b = service(0, OTHER)
    let changes = add(emptyChanges("acme"), b)
    changes = stageRemoval(changes, "prod", a, cred(2).client_id)
    changes = add(changes, a)
    expect(saveRequest(changes)).toEqual({
      changes: [
        { op: "remove_credential", environment: "prod", service_uuid: UUID, client_id: cred(2).client_id },
        { op: "add_credential", environment: "prod", service_uuid: OTHER },
        { op: "add_credential", environment: "prod", service_uuid: UUID }
      ]
    })
    // Keys are the page's own business: they are not sent.
    expect(JSON.stringify(saveRequest(changes))).not.toContain("key")
  })

  test("reconcile keeps what still applies to a fresh document and drops the rest", () => {
    const a = service(2)
    const b = service(0, OTHER)
    let changes = stageRemoval(emptyChanges("acme"), "prod", a, cred(1).client_id)
    changes = stageRemoval(changes, "prod", a, cred(2).client_id)
    changes = add(changes, a)
    changes = add(changes, b)

    // Someone deleted credential 2 and service b meanwhile.
    const fresh = doc([{ ...a, credentials: [cred(1)] }])
    const kept = reconcile(changes, fresh)
    expect(kept.removes.map((r) => r.client_id)).toEqual([cred(1).client_id])
    expect(kept.adds.map((x) => x.service_uuid)).toEqual([UUID])
    expect(kept.nextKey).toBe(changes.nextKey)

    // Another profile's document starts afresh; a deleted environment takes its changes along.
    expect(reconcile(changes, doc([a], "other"))).toEqual(emptyChanges("other"))
    expect(isDirty(reconcile(changes, { profile: "acme", created_at: null, environments: [] }))).toBe(false)
  })

  test("after a conflict, the reloaded document shows which services would go over the limit", () => {
    const one = service(1)
    const changes = add(emptyChanges("acme"), one)
    expect(overLimit(changes, doc([one]))).toEqual([])
    // Someone else added the second credential: live 2 + 1 staged.
    const reloaded = doc([service(2)])
    const kept = reconcile(changes, reloaded)
    expect(kept.adds).toHaveLength(1)
    expect(overLimit(kept, reloaded)).toEqual([{ environment: "prod", service_uuid: UUID, count: 3 }])
  })

  test("normalizeDoc copes with whatever the server sent", () => {
    expect(normalizeDoc(null, "acme")).toEqual({
      profile: "acme",
      created_at: null,
      credential_max_lifetime_days: null,
      environments: []
    })
    const normalized = normalizeDoc(
      {
        profile: "acme",
        created_at: "2024-01-01T00:00:00.000Z",
        environments: [{ name: "prod", services: [{ uuid: UUID, auth_type: "none", credentials: [{ client_id: "svc_x" }] }] }]
      },
      "ignored"
    )
    expect(normalized.profile).toBe("acme")
    expect(normalized.environments[0]!.services[0]).toEqual({
      uuid: UUID,
      name: "",
      auth_type: "none",
      handler: undefined,
      rate_limit: null,
      require_dpop: false,
      credentials: [{ client_id: "svc_x", created_at: null, expires_at: null, last_used_at: null }]
    })
  })

  test("a service update keeps require_dpop unless told otherwise, and sends it only when true", () => {
    const strict = { ...service(1), require_dpop: true }
    expect(serviceUpdate(strict, "S", "echo", "").require_dpop).toBe(true)
    expect(serviceUpdate(strict, "S", "echo", "", {}, null, false)).not.toHaveProperty("require_dpop")
    expect(serviceUpdate(service(1), "S", "echo", "")).not.toHaveProperty("require_dpop")
    expect(serviceUpdate(service(1), "S", "echo", "", {}, null, true).require_dpop).toBe(true)
    const shown = normalizeDoc({ environments: [{ name: "prod", services: [{ uuid: UUID, require_dpop: true }] }] }, "acme")
    expect(shown.environments[0]!.services[0]!.require_dpop).toBe(true)
  })

  test("a service update keeps the stored rate limit unless given another (null: none)", () => {
    const s = { ...service(1), rate_limit: { requests: 5, per_seconds: 60 } }
    expect(serviceUpdate(s, "S", "echo", "").rate_limit).toEqual({ requests: 5, per_seconds: 60 })
    expect(serviceUpdate(s, "S", "echo", "", {}, { requests: 1, per_seconds: 1 }).rate_limit).toEqual({ requests: 1, per_seconds: 1 })
    expect(serviceUpdate(s, "S", "echo", "", {}, null)).not.toHaveProperty("rate_limit")
    expect(rateLimitFields("", " ")).toEqual({ rateLimit: null })
    expect(rateLimitFields("10", "60")).toEqual({ rateLimit: { requests: 10, per_seconds: 60 } })
    expect(rateLimitFields("0", "60").error).toBeDefined()
    expect(rateLimitFields("10", "3601").error).toBeDefined()
  })

  test("expiry marks: expired, within 30 days, or none; a staged addition carries its expiry", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(expiryMark(null, now)).toBeNull()
    expect(expiryMark("2025-12-31T23:59:59Z", now)).toBe("expired")
    expect(expiryMark("2026-01-20T00:00:00Z", now)).toBe("soon")
    expect(expiryMark("2026-03-01T00:00:00Z", now)).toBeNull()
    const staged = stageAdd(emptyChanges("acme"), "prod", service(0))!
    const withExpiry = { ...staged.changes, adds: [{ ...staged.add, expires_at: "2026-02-01T00:00:00.000Z" }] }
    expect(saveRequest(withExpiry).changes).toEqual([
      { op: "add_credential", environment: "prod", service_uuid: UUID, expires_at: "2026-02-01T00:00:00.000Z" }
    ])
  })

  test("a service update renames, sets the handler and keeps the authentication", () => {
    const s = { ...service(1), auth_type: "none" }
    expect(serviceUpdate(s, "  Search  ", "echo", "https://ignored.example")).toEqual({
      name: "Search",
      auth_type: "none",
      handler: { type: "echo" }
    })
    expect(serviceUpdate(s, "Search", "proxy", " https://upstream.example/api ")).toEqual({
      name: "Search",
      auth_type: "none",
      handler: { type: "proxy", url: "https://upstream.example/api" }
    })
  })

  test("a proxy update carries its timeout, and static headers only when typed (absent keeps the stored ones)", () => {
    const s = service(1)
    expect(serviceUpdate(s, "S", "proxy", "https://u.example", { timeoutMs: " 2500 " }).handler)
      .toEqual({ type: "proxy", url: "https://u.example", timeout_ms: 2500 })
    expect(serviceUpdate(s, "S", "proxy", "https://u.example", { timeoutMs: "", headers: { "X-Api-Key": "k" } }).handler)
      .toEqual({ type: "proxy", url: "https://u.example", headers: { "X-Api-Key": "k" } })
    expect(serviceUpdate(s, "S", "echo", "", { timeoutMs: "100", headers: {} }).handler).toEqual({ type: "echo" })
  })

  test("static headers typed as lines of Name: value; a line that is not one is named by its number", () => {
    expect(headerLines("X-Api-Key: abc:def\n\n  Authorization : Token t  \n")).toEqual({
      headers: { "X-Api-Key": "abc:def", Authorization: "Token t" }
    })
    expect(headerLines("")).toEqual({ headers: {} })
    expect(headerLines("X-A: 1\nsecret-without-colon")).toEqual({ error: "Line 2 is not \"Name: value\"." })
    expect(headerLines(": value")).toEqual({ error: "Line 1 is not \"Name: value\"." })
  })
})
