/** How many rows of each kind a file holds, or an import added: for the operator's summary. */
import type { ExportedTables } from "./ExportRows.js"

export interface TableCounts {
  readonly profiles: number
  readonly environments: number
  readonly services: number
  readonly credentials: number
  /** Of `credentials`, the tombstones (deleted credentials, kept so a client id is never reused). */
  readonly deletedCredentials: number
  /** Server keys and signing keys. */
  readonly keys: number
  /** Of `keys`, the signing keys (`signing_keys`). */
  readonly signingKeys: number
  readonly auditEvents: number
  readonly trustedIssuers: number
}

export const countTables = (tables: ExportedTables): TableCounts => ({
  profiles: tables.profiles.length,
  environments: tables.environments.length,
  services: tables.services.length,
  credentials: tables.credentials.length,
  deletedCredentials: tables.credentials.filter((c) => c.deleted_at !== null).length,
  keys: tables.server_keys.length + tables.signing_keys.length,
  signingKeys: tables.signing_keys.length,
  auditEvents: tables.audit_events.length,
  trustedIssuers: tables.trusted_issuers.length
})

/** The counts that are not part of another (a sum of them counts each row once). */
export const DISTINCT_COUNTS = ["profiles", "environments", "services", "credentials", "keys", "auditEvents", "trustedIssuers"] as const

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/**
 * `1 profile, 2 environments, 3 services, 4 credentials (1 deleted), 3 keys (2 signing), 5 audit
 * events`, and `, 1 trusted issuer` when there are any (a database without them reads as before).
 */
export const describeCounts = (counts: TableCounts): string =>
  `${plural(counts.profiles, "profile")}, ${plural(counts.environments, "environment")}, ${plural(counts.services, "service")}, ${
    plural(counts.credentials, "credential")
  } (${counts.deletedCredentials} deleted), ${plural(counts.keys, "key")} (${counts.signingKeys} signing), ${
    plural(counts.auditEvents, "audit event")
  }${counts.trustedIssuers === 0 ? "" : `, ${plural(counts.trustedIssuers, "trusted issuer")}`}`
