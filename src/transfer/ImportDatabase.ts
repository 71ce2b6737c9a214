/**
 * `service-auth import`: a checked export file written into a database in one transaction, all or
 * nothing, into an empty target or merged into one that holds data (docs/operators.md).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option, Schema } from "effect"
import { DIGEST_KEY_NAME } from "../catalogue/ClientSecrets.js"
import { MAX_CREDENTIALS } from "../domain/Limits.js"
import { SIGNING_KEY_NAME } from "../keys/SigningKeyMaterial.js"
import { awaitCacheAcknowledgement } from "../catalogue/CacheAcknowledgement.js"
import { catalogueWriteWith } from "../catalogue/CatalogueWritesSql.js"
import { serverKeyValue } from "../keys/ServerKeyStore.js"
import { parseFailureIsDefect } from "../storage/StorageErrors.js"
import { latestMigration } from "./DatabaseSchema.js"
import type { ExportDocument } from "./ExportFile.js"
import { serviceKey } from "./ExportRows.js"
import { compareSigningKeys } from "./ImportSigningKeys.js"
import { countTables, plural, type TableCounts } from "./TransferCounts.js"
import { TransferRefused } from "./TransferErrors.js"
import { normalisedOrigins } from "../domain/UpstreamPolicy.js"

/** A profile's origins as stored: normalised, as the admin API stores them (null: none). */
const originsText = (origins: ReadonlyArray<string> | null) => {
  const normalised = normalisedOrigins(origins)
  return normalised === null ? null : JSON.stringify(normalised)
}

export interface ImportSummary {
  /** `replace`: the target held no catalogue; `merge`: what was missing was added. */
  readonly mode: "replace" | "merge"
  /** What the file holds. */
  readonly file: TableCounts
  /** Rows written (inserted; on a merge, rows already present are not counted). */
  readonly added: TableCounts
  /** Credentials live in the target and deleted in the file, now deleted in the target too. */
  readonly revoked: number
  /**
   * Keys the target held with another value, replaced by the file's (only where no live credential
   * depended on them): server key names, and `signing_keys` for the target's set of signing keys.
   */
  readonly replacedKeys: ReadonlyArray<string>
  /**
   * Whether servers running on the target must restart to use the file's keys: the digest key is
   * loaded only at start, and so is a signing key from before rotation adopted. Signing keys are
   * reloaded every 2 s by running servers.
   */
  readonly restartNeeded: boolean
}

const VersionRow = Schema.Struct({ version: Schema.String })
const CountRow = Schema.Struct({ profiles: Schema.Number, credentials: Schema.Number, live: Schema.Number })
const SameRow = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Boolean) })
const LiveRow = Schema.Struct({ profile: Schema.String, environment: Schema.String, service_uuid: Schema.String, live: Schema.Number })
const RevokedRow = Schema.Struct({ revoked: Schema.Boolean })
const LastRow = Schema.Struct({ last: Schema.String })
const CredentialUse = Schema.Struct({
  client_id: Schema.String,
  last_used_at: Schema.NullOr(Schema.String),
  deleted_at: Schema.NullOr(Schema.String)
})

/** The statements of an import that answer rows, declared with their rows' schemas. */
const importStatements = (sql: SqlClient.SqlClient) => ({
  // One row always, as every count below: none, or another shape, is a bug (a defect).
  version: SqlSchema.single({
    Request: Schema.Void,
    Result: VersionRow,
    execute: () => sql`SELECT version::text AS version FROM catalogue_version`
  }),
  present: SqlSchema.single({
    Request: Schema.Void,
    Result: CountRow,
    execute: () =>
      sql`SELECT (SELECT count(*) FROM profiles)::int AS profiles, (SELECT count(*) FROM credentials)::int AS credentials,
                 (SELECT count(*) FROM credentials WHERE deleted_at IS NULL)::int AS live`
  }),
  serverKey: serverKeyValue(sql),
  /** Which columns of a row already there equal the file's (`compare` answers them as booleans). */
  sameColumns: <E>(compare: Effect.Effect<ReadonlyArray<unknown>, E>) =>
    SqlSchema.findOne({ Request: Schema.Void, Result: SameRow, execute: () => compare })(undefined),
  // Present alike: a deletion on either side stays one (revocation is never undone by an import).
  mergeUse: SqlSchema.findOne({
    Request: CredentialUse,
    Result: RevokedRow,
    execute: (r) =>
      sql`WITH before AS (SELECT deleted_at FROM credentials WHERE client_id = ${r.client_id})
          UPDATE credentials SET last_used_at = GREATEST(last_used_at, ${r.last_used_at}::timestamptz),
                                 deleted_at = LEAST(deleted_at, ${r.deleted_at}::timestamptz)
          WHERE client_id = ${r.client_id}
          RETURNING ((SELECT deleted_at FROM before) IS NULL AND deleted_at IS NOT NULL) AS revoked`
  }),
  overLimit: SqlSchema.findOne({
    Request: Schema.Void,
    Result: LiveRow,
    execute: () =>
      sql`SELECT profile, environment, service_uuid, count(*)::int AS live FROM credentials WHERE deleted_at IS NULL
          GROUP BY profile, environment, service_uuid HAVING count(*) > ${MAX_CREDENTIALS}
          ORDER BY profile, environment, service_uuid LIMIT 1`
  }),
  lastEvent: SqlSchema.single({
    Request: Schema.Void,
    Result: LastRow,
    execute: () => sql`SELECT coalesce(max(id), 0)::text AS last FROM audit_events`
  })
})

/** Why a key of the target must equal the file's on a merge, in the operator's terms. */
const keyMismatch = (name: string) =>
  name === DIGEST_KEY_NAME
    ? "the target's credential digest key differs from the file's, and its live credentials depend on it: " +
      "the imported credentials could never authenticate there"
    : name === SIGNING_KEY_NAME
    ? "the target's signing key differs from the file's, and its live credentials' tokens depend on it: " +
      "tokens issued before the export would not verify there"
    : `the target's server key ${name} differs from the file's, and its live credentials may depend on it`

/**
 * Imports `document` in one transaction, through the catalogue-write path (the version is bumped
 * and running instances are told to empty their caches when it commits). All or nothing: any
 * refusal rolls everything back.
 *
 * - Target empty (no profile and no credential, not even deleted ones; a server that merely started
 *   there has generated keys, which are replaced by the file's): everything is inserted.
 * - Otherwise refused unless `merge`. A merge inserts what is missing; a row present with other
 *   content is a conflict that refuses the import, except two columns of credentials where the
 *   safe value wins: `deleted_at` (a deletion on either side stays a deletion, the earlier one) and
 *   `last_used_at` (the later). Keys must be identical or absent in the target, unless the target
 *   has no live credential: then nothing depends on its keys, and the file's replace them. Signing
 *   keys count as one set (`compareSigningKeys`), replaced whole, inserted in the file's order.
 * - Either way, no service may end with more than 2 live credentials, and the file's audit events
 *   the target does not hold yet are appended in the file's order.
 * - Trusted issuers are rows like the catalogue's: the same name with another URL or setting is a
 *   conflict naming them; their times are not compared.
 */
export const importDatabase = Effect.fn("Transfer.importDatabase")(function*(
  document: ExportDocument,
  options: { readonly merge: boolean }
) {
  const sql = yield* SqlClient.SqlClient
  const statements = importStatements(sql)
  const refuse = (message: string) => Effect.fail(new TransferRefused({ message: `${message}; nothing was imported` }))
  const { tables } = document

  return yield* Effect.gen(function*() {
    // This transaction's version (catalogueWrite has bumped it, and holds the row until the commit).
    const { version } = yield* statements.version(undefined)
    const known = yield* latestMigration
    if (document.schema_version > known) {
      return yield* refuse(
        `the file comes from a database at schema version ${document.schema_version}, newer than this one (${known}): ` +
          "import it with the service-auth version that exported it, or a newer one"
      )
    }
    const present = yield* statements.present(undefined)
    const empty = present.profiles === 0 && present.credentials === 0
    if (!empty && !options.merge) {
      return yield* refuse(
        `the target database is not empty (${plural(present.profiles, "profile")}, ${
          plural(present.credentials, "credential")
        }); --merge adds what is missing`
      )
    }

    // Only live credentials (their digests, their tokens) depend on the target's keys: with none,
    // replacing its keys breaks nothing.
    const keysReplaceable = present.live === 0
    const replacedKeys: Array<string> = []
    let restartNeeded = false
    let keys = 0

    // The signing keys, as one set: the file's replace the target's, or are the same. A database
    // from before rotation has its one key in server_keys (`signing_key`), adopted by the next
    // server to start; a target's rows would make that server drop it, so they go when it comes.
    const signing = yield* compareSigningKeys(tables)
    const fileHasSigningKeys = tables.signing_keys.length > 0 || tables.server_keys.some((k) => k.name === SIGNING_KEY_NAME)
    const differs = fileHasSigningKeys && signing.difference !== undefined
    if (differs && signing.difference !== "none" && !keysReplaceable) {
      return yield* refuse(
        `the target's signing keys differ from the file's (${signing.difference}), and its live credentials' tokens ` +
          "depend on them: tokens the target issued would no longer verify"
      )
    }
    let signingKeys = 0
    if (differs) {
      if (signing.targetHasRows) replacedKeys.push("signing_keys")
      yield* sql`DELETE FROM signing_keys`
      // Inserted in the file's order: the target's positions keep it.
      for (const key of tables.signing_keys) {
        yield* sql`
          INSERT INTO signing_keys (kid, public_jwk, private_key, created_at, active_from)
          VALUES (${key.kid}, ${JSON.stringify(key.public_jwk)}::jsonb, ${key.private_key}, ${key.created_at}::timestamptz,
                  ${key.active_from}::timestamptz)`
        signingKeys++
      }
    }
    // The legacy key is kept only for a file that brings no signing key rows (the target's next
    // server adopts it); beside rows, a server drops it at start anyway.
    const legacyKeyWanted = tables.signing_keys.length === 0 && differs

    for (const key of tables.server_keys) {
      if (key.name === SIGNING_KEY_NAME && !legacyKeyWanted) continue
      const existing = Option.getOrUndefined(yield* statements.serverKey(key.name))
      if (existing?.value === key.value) continue
      if (existing !== undefined) {
        // The legacy signing key was compared with the target's whole signing key set above.
        if (!keysReplaceable) return yield* refuse(keyMismatch(key.name))
        replacedKeys.push(key.name)
        if (key.name === DIGEST_KEY_NAME) restartNeeded = true
      }
      // Only a server's start adopts it, and a running one holds the target's former keys.
      if (key.name === SIGNING_KEY_NAME && signing.difference !== "none") restartNeeded = true
      yield* sql`
        INSERT INTO server_keys (name, value, created_at) VALUES (${key.name}, ${key.value}, ${key.created_at}::timestamptz)
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at`
      keys++
    }
    if (tables.signing_keys.length > 0 && differs) {
      const removed = yield* sql`DELETE FROM server_keys WHERE name = ${SIGNING_KEY_NAME} RETURNING name`
      if (removed.length > 0) replacedKeys.push(SIGNING_KEY_NAME)
    }
    keys += signingKeys

    /** Inserted (true), or already there with the same content (false); otherwise a conflict naming the row. */
    const insertOrMatch = (
      row: string,
      insert: Effect.Effect<ReadonlyArray<unknown>, SqlError>,
      compare: Effect.Effect<ReadonlyArray<unknown>, SqlError>
    ) =>
      Effect.gen(function*() {
        if ((yield* insert).length > 0) return true
        const same = Option.getOrUndefined(yield* statements.sameColumns(compare))
        const different = Object.entries(same ?? {}).filter(([, equal]) => equal !== true).map(([column]) => column)
        if (different.length > 0) {
          return yield* refuse(`${row} exists in the target with another ${different.join(", ")} (a conflict)`)
        }
        return false
      })

    let profiles = 0
    for (const r of tables.profiles) {
      const added = yield* insertOrMatch(
        `profile ${r.profile}`,
        sql`INSERT INTO profiles (profile, created_at, credential_max_lifetime_days, upstream_origins)
            VALUES (${r.profile}, ${r.created_at}::timestamptz, ${r.credential_max_lifetime_days},
                    ${originsText(r.upstream_origins)}::jsonb)
            ON CONFLICT (profile) DO NOTHING RETURNING profile`,
        sql`SELECT created_at = ${r.created_at}::timestamptz AS created_at FROM profiles WHERE profile = ${r.profile}`
      )
      if (added) profiles++
    }
    let environments = 0
    for (const r of tables.environments) {
      const added = yield* insertOrMatch(
        `environment ${r.profile}/${r.name}`,
        sql`INSERT INTO environments (profile, name, created_at) VALUES (${r.profile}, ${r.name}, ${r.created_at}::timestamptz)
            ON CONFLICT (profile, name) DO NOTHING RETURNING name`,
        sql`SELECT created_at = ${r.created_at}::timestamptz AS created_at
            FROM environments WHERE profile = ${r.profile} AND name = ${r.name}`
      )
      if (added) environments++
    }
    let services = 0
    for (const r of tables.services) {
      const handler = JSON.stringify(r.handler)
      const rateLimit = r.rate_limit === null ? null : JSON.stringify(r.rate_limit)
      const added = yield* insertOrMatch(
        `service ${serviceKey(r.profile, r.environment, r.uuid)}`,
        sql`INSERT INTO services (profile, environment, uuid, name, auth_type, handler, rate_limit, require_dpop,
                                  upstream_approved, created_at)
            VALUES (${r.profile}, ${r.environment}, ${r.uuid}, ${r.name}, ${r.auth_type}, ${handler}::jsonb,
                    ${rateLimit}::jsonb, ${r.require_dpop}, ${r.upstream_approved}, ${r.created_at}::timestamptz)
            ON CONFLICT (profile, environment, uuid) DO NOTHING RETURNING uuid`,
        sql`SELECT name = ${r.name} AS name, auth_type = ${r.auth_type} AS auth_type, handler = ${handler}::jsonb AS handler,
                   created_at = ${r.created_at}::timestamptz AS created_at
            FROM services WHERE profile = ${r.profile} AND environment = ${r.environment} AND uuid = ${r.uuid}`
      )
      if (added) services++
    }
    // An issuer is the same when its URL and every setting are: when it was registered or last
    // saved is not compared (one registered by hand on the target, alike, is no conflict).
    let trustedIssuers = 0
    for (const r of tables.trusted_issuers) {
      const setting = (key: keyof typeof r.settings) => JSON.stringify(r.settings[key])
      const added = yield* insertOrMatch(
        `trusted issuer ${r.name}`,
        sql`INSERT INTO trusted_issuers (name, issuer, settings, created_at, updated_at)
            VALUES (${r.name}, ${r.issuer}, ${JSON.stringify(r.settings)}::jsonb, ${r.created_at}::timestamptz,
                    ${r.updated_at}::timestamptz)
            ON CONFLICT (name) DO NOTHING RETURNING name`,
        sql`SELECT issuer = ${r.issuer} AS issuer,
                   settings -> 'jwks' IS NOT DISTINCT FROM ${setting("jwks")}::jsonb AS jwks,
                   settings -> 'audience' IS NOT DISTINCT FROM ${setting("audience")}::jsonb AS audience,
                   settings -> 'algorithms' IS NOT DISTINCT FROM ${setting("algorithms")}::jsonb AS algorithms,
                   settings -> 'max_token_lifetime_seconds' IS NOT DISTINCT FROM ${setting("max_token_lifetime_seconds")}::jsonb
                     AS max_token_lifetime_seconds,
                   settings -> 'profiles' IS NOT DISTINCT FROM ${setting("profiles")}::jsonb AS profiles,
                   settings -> 'allow_insecure_loopback' IS NOT DISTINCT FROM ${setting("allow_insecure_loopback")}::jsonb
                     AS allow_insecure_loopback
            FROM trusted_issuers WHERE name = ${r.name}`
      )
      if (added) trustedIssuers++
    }
    let credentials = 0
    let deletedCredentials = 0
    let revoked = 0
    for (const r of tables.credentials) {
      const added = yield* insertOrMatch(
        `credential ${r.client_id}`,
        sql`INSERT INTO credentials (client_id, profile, environment, service_uuid, secret_hash, created_at, last_used_at, deleted_at,
                                     expires_at, expiry_recorded, introspect_profiles)
            VALUES (${r.client_id}, ${r.profile}, ${r.environment}, ${r.service_uuid}, ${r.secret_hash},
                    ${r.created_at}::timestamptz, ${r.last_used_at}::timestamptz, ${r.deleted_at}::timestamptz,
                    ${r.expires_at}::timestamptz, ${r.expiry_recorded},
                    ${r.introspect_profiles === null ? null : JSON.stringify(r.introspect_profiles)}::jsonb)
            ON CONFLICT (client_id) DO NOTHING RETURNING client_id`,
        sql`SELECT profile = ${r.profile} AND environment = ${r.environment} AND service_uuid = ${r.service_uuid} AS service,
                   secret_hash = ${r.secret_hash} AS secret_hash, created_at = ${r.created_at}::timestamptz AS created_at
            FROM credentials WHERE client_id = ${r.client_id}`
      )
      if (added) {
        credentials++
        if (r.deleted_at !== null) deletedCredentials++
        continue
      }
      const update = yield* statements.mergeUse(r)
      if (Option.exists(update, ({ revoked }) => revoked)) revoked++
    }

    const overLimit = Option.getOrUndefined(yield* statements.overLimit(undefined))
    if (overLimit !== undefined) {
      return yield* refuse(
        `service ${serviceKey(overLimit.profile, overLimit.environment, overLimit.service_uuid)} would have ${overLimit.live} ` +
          `live credentials, at most ${MAX_CREDENTIALS} are allowed`
      )
    }

    // The history: the file's events the target does not hold yet (as it was before this import,
    // so that identical events within the file all count), appended in the file's order.
    const { last } = yield* statements.lastEvent(undefined)
    let auditEvents = 0
    for (const e of tables.audit_events) {
      const details = e.details === null ? null : JSON.stringify(e.details)
      const inserted = yield* sql`
        INSERT INTO audit_events (time, actor, source, action, profile, environment, service_uuid, client_id, details)
        SELECT ${e.time}::timestamptz, ${e.actor}::text, ${e.source}::text, ${e.action}::text, ${e.profile}::text,
               ${e.environment}::text, ${e.service_uuid}::text, ${e.client_id}::text, ${details}::jsonb
        WHERE NOT EXISTS (
          SELECT 1 FROM audit_events
          WHERE id <= ${last}::bigint AND time = ${e.time}::timestamptz AND actor = ${e.actor} AND source = ${e.source}
            AND action = ${e.action} AND profile IS NOT DISTINCT FROM ${e.profile}::text
            AND environment IS NOT DISTINCT FROM ${e.environment}::text
            AND service_uuid IS NOT DISTINCT FROM ${e.service_uuid}::text
            AND client_id IS NOT DISTINCT FROM ${e.client_id}::text AND details IS NOT DISTINCT FROM ${details}::jsonb)
        RETURNING id`
      auditEvents += inserted.length
    }

    const summary: ImportSummary = {
      mode: empty ? "replace" : "merge",
      file: countTables(tables),
      added: { profiles, environments, services, credentials, deletedCredentials, keys, signingKeys, auditEvents, trustedIssuers },
      revoked,
      replacedKeys,
      restartNeeded
    }
    return { summary, version }
  }).pipe(
    // A row of another shape, or no row where one always is: a bug, not the file's fault.
    parseFailureIsDefect,
    Effect.catchTag("NoSuchElementException", Effect.die),
    catalogueWriteWith(sql),
    Effect.tap(({ version }) => awaitCacheAcknowledgement(version)),
    Effect.map(({ summary }) => summary)
  )
})
