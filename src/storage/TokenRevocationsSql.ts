/**
 * The revocation endpoint's storage on SQL (migration 0007), part of `CredentialRepoSql`: a live
 * credential found by its client id, and a revocation written as a catalogue write of the token's
 * service (`catalogueWrite`), so that the coherence protocol carries it to every instance's cache
 * exactly as it carries a credential's deletion (docs/cache-coherence.md).
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import type { AuditEvent } from "../domain/AuditEvents.js"
import { revocationEvent } from "./CatalogueEvents.js"
import { type CatalogueScope, writeScopes } from "../catalogue/CatalogueScope.js"
import type { CredentialRepoShape } from "./CredentialRepo.js"
import { credentialStatements } from "./CredentialRepoStatements.js"
import { parseFailureIsDefect } from "./Rows.js"
import { storageOperation } from "./StorageErrors.js"

export const revocationOperations = (
  sql: SqlClient.SqlClient,
  catalogueWrite: (
    scopes: ReadonlyArray<CatalogueScope>
  ) => <A, E, R>(write: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError.SqlError, R>,
  record: (events: ReadonlyArray<AuditEvent>) => Effect.Effect<void, SqlError.SqlError>
): Pick<CredentialRepoShape, "findClientCredential" | "revokeToken"> => {
  const { clientCredential } = credentialStatements(sql)
  return {
    findClientCredential: (clientId) =>
      clientCredential(clientId).pipe(
        parseFailureIsDefect,
        Effect.map(Option.map((row) => ({
          address: { profile: row.profile, environment: row.environment, uuid: row.service_uuid },
          secretHash: row.secret_hash,
          expiresAt: row.expires_at,
          introspectProfiles: row.introspect_profiles
        }))),
        storageOperation
      ),

    revokeToken: (revocation, now, actor) =>
      Effect.gen(function*() {
        // Kept until the token's own expiry: older rows are of tokens refused anyway.
        yield* sql`DELETE FROM revoked_tokens WHERE expires_at <= ${now}`
        const inserted = yield* sql`
          INSERT INTO revoked_tokens (jti, client_id, expires_at)
          VALUES (${revocation.jti}, ${revocation.clientId}, ${revocation.expiresAt})
          ON CONFLICT (jti) DO NOTHING RETURNING jti`
        if (inserted.length === 0) return false
        yield* record([revocationEvent(actor, now, revocation)])
        return true
      }).pipe(catalogueWrite(writeScopes.service(revocation.address)), storageOperation)
  }
}
