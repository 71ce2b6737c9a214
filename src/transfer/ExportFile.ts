/**
 * A whole database as one JSON document, and back (`service-auth export` / `import`,
 * docs/operators.md): every profile, environment, service and credential (secret digests: the
 * secrets themselves exist nowhere), the server keys (the credential digest key, and the signing key
 * of databases from before rotation), every signing key with its schedule times and the audit
 * trail, and the trusted issuers of workload identity federation, rows as stored (sealed keys stay
 * sealed), so that a database moved from the embedded store to PostgreSQL keeps every credential
 * (federated ones with their issuers), every unexpired token, its key schedule and its history.
 *
 * `parseExport` checks a whole file before anything touches a database, and says where a problem
 * is without repeating the value.
 */
import { Either, ParseResult, Schema } from "effect"
import { inconsistency } from "./ExportChecks.js"
import { ExportedTables, StoredTimestamp } from "./ExportRows.js"
import { InvalidExportFile } from "./TransferErrors.js"

export const EXPORT_FORMAT = "service-auth-export"
/**
 * Version 2 added `signing_keys` and `audit_events`. A version-1 file (written before) still imports:
 * its missing tables are read as empty. A service-auth that reads only version 1 refuses a version-2
 * file by its version, not by a table it does not know. Version 3 added columns: a
 * profile's `credential_max_lifetime_days`, a service's `rate_limit`, a credential's `expires_at`
 * and `expiry_recorded`; an older file's rows read them as null (false), so as before. A service's
 * `require_dpop` came later within version 3: a file without it reads false; a
 * service-auth that does not know it refuses the file by its `schema_version` (0010 and later). So
 * did a profile's `upstream_origins` and a service's `upstream_approved` (0011): a file without
 * them reads null and false, so its proxy services are judged by the upstream policy as an owner's.
 * A credential's `introspect_profiles` (0012) likewise: a file without it reads null, no introspection.
 * The table `trusted_issuers` (0013) too: a file without it holds none (its federated credentials are
 * refused until their issuers are registered on the target).
 */
export const EXPORT_VERSION = 3
export const READABLE_VERSIONS = [1, 2, 3] as const

export const ExportDocument = Schema.Struct({
  format: Schema.Literal(EXPORT_FORMAT),
  version: Schema.Literal(...READABLE_VERSIONS),
  exported_at: StoredTimestamp,
  /** The last migration applied to the exported database: a target must know it. */
  schema_version: Schema.Int,
  tables: ExportedTables.pipe(Schema.filter((tables) => inconsistency(tables) ?? true))
})
export type ExportDocument = typeof ExportDocument.Type

// Unknown fields are refused, not dropped: they would be data of a newer schema, silently lost.
export const decodeDocument = Schema.decodeUnknownEither(ExportDocument, { onExcessProperty: "error", errors: "first" })

/** `tables.credentials[3].secret_hash`: where in the file. */
const describePath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join("")

/** The first problem of a decode, where it is and what is wrong, without the value itself. */
export const describeIssue = (error: ParseResult.ParseError): string => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issue === undefined) return "not a valid export"
  const where = issue.path.length === 0 ? "the document" : describePath(issue.path)
  // The default messages of a type mismatch quote the value: say only what was expected.
  const message = issue._tag === "Type" && /^Expected .*, actual /s.test(issue.message)
    ? issue.message.replace(/, actual .*$/s, "")
    : issue._tag === "Unexpected"
    ? "is not a field of this format"
    : issue._tag === "Missing"
    ? "is missing"
    : issue.message
  return `${where}: ${message}`
}

/** The whole file checked, before anything touches a database. */
export const parseExport = (text: string): Either.Either<ExportDocument, InvalidExportFile> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(new InvalidExportFile({ message: `not JSON (${(error as Error).message})` }))
  }
  const header = json as { format?: unknown; version?: unknown } | null
  if (typeof header !== "object" || header === null || header.format !== EXPORT_FORMAT) {
    return Either.left(new InvalidExportFile({ message: `not a service-auth export ("format" is not "${EXPORT_FORMAT}")` }))
  }
  if (!(READABLE_VERSIONS as ReadonlyArray<unknown>).includes(header.version)) {
    return Either.left(
      new InvalidExportFile({
        message: `export format version ${JSON.stringify(header.version)} is not one this service-auth reads (${
          READABLE_VERSIONS.join(", ")
        })`
      })
    )
  }
  return Either.mapLeft(decodeDocument(json), (error) => new InvalidExportFile({ message: describeIssue(error) }))
}
